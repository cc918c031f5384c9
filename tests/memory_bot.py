"""A cheating bot for the tests: it remembers every deal it played, in memory, and says on stderr
when it is dealt one again (``RECOGNISED``).

``end`` reveals every card, so a process that played a deal in one seat rotation would know
the hidden cards in the next. This bot does not need ``end``: in a game it keeps its own six
setup cards and the face-up cards each opponent chose (public). Dealt the same cards again in
another seat, it holds the cards an opponent chose its face-up from, and that opponent now
chooses face-up from the cards it held before: both together match by chance about once in
a million games. It keeps each opponent's face-up cards as first shown, the full choice: the
piles shrink in play, and a one-card remnant would lie in a six-card hand one time in nine. It plays the first action offered, so its games are deterministic.
"""
import json
import sys

past = []  # (game id, my setup hand, [opponents' face-up cards])
game = hand = None
faces: dict[int, frozenset] = {}
told = False


def cards(face_up):
    return frozenset(c for pile in face_up or [] for c in pile)


def recognised():
    for old_game, old_hand, old_faces in past:
        if any(f and f <= hand for f in old_faces) and any(f and f <= old_hand for f in faces.values()):
            return old_game
    return None


for line in sys.stdin:
    msg = json.loads(line)
    kind = msg["type"]
    if kind == "hello":
        print('{"type":"hello","protocol":1,"name":"memory","version":"1"}', flush=True)
    elif kind == "start":
        if game is not None:
            past.append((game, hand, list(faces.values())))
        game, hand, faces, told = msg["game"], None, {}, False
    elif kind == "request":
        view = msg["view"]
        if view["phase"] == "setup" and hand is None:
            hand = frozenset(view["hand"])
        for p in view["players"]:  # each opponent's face-up as first shown: the three it chose
            if p["seat"] != view["seat"] and cards(p["face_up"]):
                faces.setdefault(p["seat"], cards(p["face_up"]))
        old = recognised() if hand is not None and faces and not told else None
        if old is not None:
            told = True
            print(f"RECOGNISED {game}: the deal of {old}", file=sys.stderr, flush=True)
        print('{"type":"action","request":%d,"action":0}' % msg["id"], flush=True)
    elif kind == "shutdown":
        break

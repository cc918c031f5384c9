"""A re-simulated game as plain JSON: one snapshot per step plus what the step did.

The terminal display and the HTML replay both draw from :func:`replay_data`, so
they show the same thing. A snapshot is omniscient (every hand and face-down
card); the HTML page hides from it what a chosen seat could not see.
"""

from __future__ import annotations

import json

from typing import Any

from ..engine import Rules, State, effective_top
from ..engine.cards import RANK_NAMES, card_str, cards_str
from .simulate import Frame, Replay, thought_of

DATA_VERSION = 1
FLAG_OF = {"burned": "burn", "picked_up": "pickup", "gave_pile": "pickup", "skipped": "skip",
           "reversed": "reverse", "flipped": "flip", "forfeited": "forfeit", "went_out": "out",
           "game_over": "over", "surrendered": "surrender"}
BURN_WHY = {"ten": "a 10", "four_of_a_kind": "four of a kind"}


def top_index(rules: Rules, pile: tuple[int, ...]) -> int | None:
    """Index in ``pile`` of the card that counts as its top: the topmost that is not see-through."""
    for i in range(len(pile) - 1, -1, -1):
        if pile[i] >> 2 not in rules.see_through:
            return i
    return None


def snapshot(state: State) -> dict[str, Any]:
    """Every card's place (omniscient), whose turn, and what the pile asks for."""
    top = effective_top(state.rules, state.pile)
    return {
        "phase": state.phase, "turn": state.turn, "to_move": state.to_move, "direction": state.direction,
        "need": state.need, "descending": state.descending,
        "pile": cards_str(state.pile), "top": top_index(state.rules, state.pile),
        "beat": None if top is None else RANK_NAMES[top],
        "stock": len(state.stock), "burned": len(state.burned), "set_aside": len(state.set_aside),
        "seats": [{
            "hand": cards_str(s.hand), "up": [cards_str(st) for st in s.face_up],
            "down": [None if c is None else card_str(c) for c in s.face_down],
            "known": cards_str(s.known), "place": s.place, "forfeit": s.forfeit, "setup": s.setup,
        } for s in state.seats],
        "over": state.result is not None,
    }


class Names:
    """Seat labels for sentences: the bot name, with the seat number where names repeat."""

    def __init__(self, players: list[str]):
        dup = len(set(players)) != len(players)
        self.labels = [f"{p}#{i}" if dup else p for i, p in enumerate(players)]

    def __call__(self, seat: Any) -> str:
        try:
            return self.labels[int(seat)]
        except (TypeError, ValueError, IndexError):
            return f"seat {seat}"


SUIT_SYMBOLS = {"C": "\u2663", "D": "\u2666", "H": "\u2665", "S": "\u2660"}


def pretty(card: str) -> str:
    """``"TC"`` as ``"10\u2663"``, ``"XR"`` as ``"red joker"``: cards in sentences."""
    if len(card) != 2:
        return str(card)
    if card[0] == "X":
        return "red joker" if card[1] == "R" else "black joker"
    return ("10" if card[0] == "T" else card[0]) + SUIT_SYMBOLS.get(card[1], card[1])


def _cards(cards: list[str]) -> str:
    return " ".join(pretty(c) for c in cards)


def _stacks(stacks: list[list[str]]) -> str:
    return " | ".join(_cards(s) for s in stacks) or "(none)"


def describe_event(e: dict[str, Any], who: Names) -> tuple[str, int | None, str | None]:
    """(omniscient text, owner seat of a private part or None, what the other seats were told)."""
    k = e.get("kind")
    w = who(e.get("seat"))
    if k == "played":
        return f"{w} plays {_cards(e['cards'])} from {e['zone'].replace('_', '-')}", None, None
    if k == "flipped":
        verdict = "it plays" if e["legal"] else "it cannot go: picks up"
        return f"{w} flips face-down #{e['position'] + 1}: {pretty(e['card'])} ({verdict})", None, None
    if k == "drew":
        n = e["count"]
        public = f"{w} draws {n}"
        return (f"{public}: {_cards(e['cards'])}" if e.get("cards") else public), e["seat"], public
    if k == "burned":
        return f"burn! {len(e['cards'])} cards ({BURN_WHY.get(e['why'], e['why'])})", None, None
    if k == "picked_up":
        return f"{w} picks up the pile: {len(e['cards'])} card(s) {_cards(e['cards'])}", None, None
    if k == "surrendered":
        return f"{w} surrenders face-up {pretty(e['card'])} onto the pile", None, None
    if k == "gave_pile":
        return f"{w} gives the pile ({len(e['cards'])} cards) to {who(e['target'])}", None, None
    if k == "skipped":
        return f"{w} is skipped", None, None
    if k == "reversed":
        return f"direction reversed ({'ascending' if e['direction'] > 0 else 'descending'} seats)", None, None
    if k == "went_out":
        return f"{w} is out: place {e['place']}", None, None
    if k == "forfeited":
        return f"{w} forfeits ({e['reason']})", None, None
    if k == "start_card":
        return f"start card {pretty(e['card'])}" + (" set aside (it cannot start the pile)" if e["set_aside"] else ""), None, None
    if k == "leads":
        return f"{w} leads ({e['why']})", None, None
    if k == "setup":
        if "face_up" in e:
            return f"{w} sets face-up: {_stacks(e['face_up'])}", e["seat"], f"{w} chooses face-up cards"
        return f"{w} chooses face-up cards", None, None
    if k == "game_over":
        return f"game over: {result_text(e['result'], who)}", None, None
    return f"{k}: {e}", None, None


def result_text(result: dict[str, Any], who: Names) -> str:
    order = result.get("order", [])
    parts = []
    place = 1
    for group in order:
        names = ", ".join(who(s) for s in group)
        parts.append(f"{place}. {names}")
        place += len(group)
    text = f"{result.get('reason', '?').replace('_', ' ')}" + (" (draw)" if result.get("draw") else "")
    forf = result.get("forfeits") or {}
    if forf:
        text += "; forfeits: " + ", ".join(f"{who(s)} {r}" for s, r in forf.items())
    return text + ("; " + "  ".join(parts) if parts else "")


def describe_action(act: dict[str, Any] | None, who: Names) -> str:
    if not isinstance(act, dict):
        return "?"
    k = act.get("kind")
    if k == "play":
        text = f"play {_cards(act.get('cards', []))} from {str(act.get('from', 'hand')).replace('_', '-')}"
        if "target" in act:
            text += f", giving the pile to {who(act['target'])}"
        return text
    if k == "pick_up":
        return "pick up the pile" + (f", surrendering face-up {pretty(act['surrender'])}" if "surrender" in act else "")
    if k == "flip":
        return f"flip face-down #{act.get('position', 0) + 1}"
    if k == "set_face_up":
        return f"choose face-up: {_stacks(act.get('face_up', []))}"
    if k == "stack":
        return f"stack {_cards(act.get('cards', []))} onto face-up"
    if k == "done":
        return "done stacking"
    return str(k)


def step_info(replay: Replay, frame: Frame, who: Names) -> dict[str, Any]:
    """What happened at this frame, in words, with the log's timing, stderr and flags."""
    step = frame.step or {}
    lines = [list(describe_event(e, who)) for e in frame.events]
    flags = sorted({FLAG_OF[e["kind"]] for e in frame.events if e.get("kind") in FLAG_OF})
    info: dict[str, Any] = {"n": frame.index, "events": lines, "flags": flags,
                            "mismatch": [str(m) for m in replay.mismatches if m.step == frame.index]}
    if frame.before is None:
        info.update(kind="deal", text="the deal" + (
            "; " + ", ".join(f"{who(f.get('seat'))} failed to start ({f.get('reason')})" for f in replay.start_forfeits)
            if replay.start_forfeits else ""))
        return info
    seat = frame.seat  # (an off-turn fault's seat is not the one to move)
    info.update(seat=seat, name=who(seat), phase=frame.before.phase, turn=frame.before.turn,
                ms=step.get("ms"), stderr=[str(x) for x in step.get("stderr", [])][:50], of=len(frame.actions),
                request=step.get("request"))
    if "fault" in step:
        fault = next((f for f in replay.record.get("faults", []) if f.get("seat") == seat
                      and f.get("reason") == step["fault"]), {})
        off = " (off its turn: the seat to move is asked again)" if step.get("off_turn") else ""
        info.update(kind="fault", fault=step["fault"], message=str(fault.get("message", ""))[:500],
                    text=f"forfeit: {step['fault']}{off}" + (f": {fault['message']}" if fault.get("message") else ""))
    else:
        act = step.get("act")
        note = (" (forced: the only legal action)" if step.get("forced") else
                " (the suite position's opening: played for the seat, not asked)" if step.get("given") else "")
        info.update(kind="forced" if step.get("forced") or step.get("given") else "action", act=act,
                    choice=None if frame.action is None else frame.actions.index(frame.action),
                    text=describe_action(act, who) + note)
        info.update(thought_of(step))
    return info


def thought_text(thought: dict[str, Any]) -> str:
    """``win 62% · eval +0.18 · 412 iterations · 20,600 nodes · "keep the 2s"``."""
    parts = []
    if "win_prob" in thought:
        parts.append(f"win {100 * thought['win_prob']:.0f}%")
    if "eval" in thought:
        parts.append(f"eval {thought['eval']:+.3g}")
    for key in ("iterations", "nodes"):
        if key in thought:
            parts.append(f"{thought[key]:,} {key}")
    if "text" in thought:
        parts.append(json.dumps(thought["text"], ensure_ascii=False))
    return " · ".join(parts)


def _rules_label(options: dict[str, Any]) -> str:
    """``shithead + seven=at_most`` rather than ``shithead+``."""
    try:
        from ..config import rule_label
        return rule_label(Rules.from_options(options))
    except Exception:  # an old or odd record: its stored name is still a fair header
        return str(options.get("name", "?"))


def replay_data(replay: Replay) -> dict[str, Any]:
    """The whole replay as JSON: game facts, verification, and one frame per step."""
    rec = replay.record
    who = Names(replay.players)
    res = replay.result or rec.get("result")
    return {
        "version": DATA_VERSION,
        "game": replay.game_id,
        "players": replay.players,
        "labels": who.labels,
        "rules": _rules_label(rec.get("rules", {})),
        "seed": rec.get("seed"),
        "max_turns": rec.get("max_turns"),
        "result": res,
        "result_text": result_text(res, who) if isinstance(res, dict) else "unfinished",
        "verify": {"ok": replay.ok, "complete": replay.complete,
                   "mismatches": [str(m) for m in replay.mismatches]},
        "frames": [{"s": snapshot(f.state), "i": step_info(replay, f, who)} for f in replay.frames],
    }

"""The overview for a crowd: a ladder's batches and placements are folded under the ladder, and
the real tournaments are listed a page at a time."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from arena.serve import data, views
from arena.serve.pages import templates
from arena.tournament.runlock import tournament_lock
from arena.tournament.store import Store

from .test_serve import build_store, fake_record


def test_ladder_batches_fold_under_their_ladder_and_tournaments_page(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    build_store(path)  # a ladder with one seeding tournament
    db = Store(path)
    for k in range(30):
        tid = f"ladder:test-ladder:batch-{k:04d}"
        db.begin_tournament(tid, {"format": "batch"}, 1)
        db.save_game(tid, 0, ["alpha@1.0", "beta@2.0"], fake_record(f"b-{k}", ["alpha@1.0", "beta@2.0"], [[0], [1]]))
        if k < 28:
            db.finish_tournament(tid)
    for k in range(30):
        db.begin_tournament(f"cup-{k:02d}", {"format": "round-robin"}, 4)
    db.close()
    read = data.open_read(path)
    with tournament_lock(path, "ladder:test-ladder:batch-0029"):  # its runner is alive; batch-0028's is gone
        first = views.home(read, 1)
    (tile,) = first.ladders
    assert (tile.name, tile.batches, tile.playing, tile.stopped) == ("test-ladder", 31, 1, 1) and tile.seen
    assert len(first.tournaments) == views.TOURNAMENTS_PER_PAGE and (first.page_no, first.pages) == (1, 2)
    assert not [t for t in first.tournaments if t.id.startswith("ladder:")]
    second = views.home(read, 2)
    assert {t.id for t in first.tournaments} | {t.id for t in second.tournaments} == {f"cup-{k:02d}" for k in range(30)}
    assert views.home(read, 10**30).page_no == 2 and views.home(read, -3).page_no == 1
    read.db.close()


def test_a_batch_whose_runner_is_gone_is_shown_stopped(tmp_path: Path) -> None:
    """A batch marked running but whose run lock nobody holds (its runner was killed, or a copied
    store) is stopped, not playing; its lock held again (the next run), it plays."""
    path = tmp_path / "s.sqlite"
    build_store(path)
    db = Store(path)
    tid = "ladder:test-ladder:run:0000"
    db.begin_tournament(tid, {"format": "batch"}, 4)
    db.close()
    read = data.open_read(path)

    def tile(page: views.Home) -> str:
        opts = SimpleNamespace(allow_play=False, allow_submit=False, writable=False)
        html = templates.get_template("home.html").render(page=page, request=None, opts=opts, store="s.sqlite")
        return html.split('data-ladder="test-ladder"', 1)[1].split("</a>", 1)[0]

    gone = views.home(read)
    assert "1 stopped" in tile(gone) and "playing" not in tile(gone)
    with tournament_lock(path, tid):
        alive = views.home(read)
    assert "1 playing" in tile(alive) and "stopped" not in tile(alive)
    read.db.close()

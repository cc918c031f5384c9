"""The overview for a crowd: a ladder's batches and placements are folded under the ladder, and
the real tournaments are listed a page at a time."""

from __future__ import annotations

from pathlib import Path

from arena.serve import data, views
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
    first = views.home(read, 1)
    assert [(name, batches, running) for name, _, batches, running in first.ladders] == [("test-ladder", 31, 2)]
    assert len(first.tournaments) == views.TOURNAMENTS_PER_PAGE and (first.page_no, first.pages) == (1, 2)
    assert not [t for t in first.tournaments if t.id.startswith("ladder:")]
    second = views.home(read, 2)
    assert {t.id for t in first.tournaments} | {t.id for t in second.tournaments} == {f"cup-{k:02d}" for k in range(30)}
    assert views.home(read, 10**30).page_no == 2 and views.home(read, -3).page_no == 1
    read.db.close()

"""``arena submit --server`` following its submission through a server that stops answering: a
restarted server keeps the job in its store and runs it again, so the client waits (up to its
patience) instead of failing a submission that will still be placed. On a fake clock."""

from __future__ import annotations

import io
import urllib.error

import pytest

from arena.cli.remote import RemoteError, follow

URL = "http://club.test/submit/abc?format=json"


class FakeServer:
    """Answers from a script: a dict is the submission's JSON, an exception is raised."""

    def __init__(self, script):
        self.script = list(script)
        self.now = 0.0
        self.asked = 0

    def fetch(self, url: str):
        assert url == URL
        self.asked += 1
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, BaseException):
            raise step
        return step

    def sleep(self, s: float) -> None:
        self.now += s


def job(status: str, lines: list[str], done: bool = False, ahead: int = 0) -> dict:
    return {"status": status, "lines": lines, "done": done, "ahead": ahead}


def _follow(server: FakeServer, said: list[str], patience_s: float = 600.0):
    return follow(URL, said.append, poll_s=1.0, patience_s=patience_s, fetch=server.fetch,
                  clock=lambda: server.now, sleep=server.sleep)


REFUSED = urllib.error.URLError(ConnectionRefusedError(111, "Connection refused"))


def test_a_restart_mid_placement_is_waited_out_and_the_lines_go_on() -> None:
    server = FakeServer([job("running", ["checking x@1"]), REFUSED, REFUSED, REFUSED,
                         job("running", ["checking x@1"]), job("placed", ["checking x@1", "x@1: placed"], done=True)])
    said: list[str] = []
    end = _follow(server, said)
    assert end["done"] and said[0] == "checking x@1" and said[-1] == "x@1: placed"
    assert sum("not answering" in s for s in said) == 1 and "the server answers again" in said
    assert said.count("checking x@1") == 1


def test_a_rerun_after_a_restart_shows_its_lines_again_from_the_start() -> None:
    server = FakeServer([job("running", ["a", "b", "c"]), REFUSED, job("running", ["a2"]),
                         job("placed", ["a2", "b2"], done=True)])
    said: list[str] = []
    _follow(server, said)
    assert said[-2:] == ["a2", "b2"]


@pytest.mark.parametrize("trouble", [REFUSED, urllib.error.HTTPError(URL, 503, "busy", {}, io.BytesIO()),
                                     TimeoutError("timed out")])
def test_a_server_that_never_comes_back_ends_the_wait_after_the_patience(trouble) -> None:
    server = FakeServer([job("waiting", [], ahead=2), trouble])
    said: list[str] = []
    with pytest.raises(RemoteError, match="has not answered for 10 min"):
        _follow(server, said)
    assert 600 < server.now < 600 + 16  # pauses grow, capped at 15 s
    assert server.asked < 60  # backed off, not polled every second


@pytest.mark.parametrize("answer", [urllib.error.HTTPError(URL, 404, "gone", {}, io.BytesIO()),
                                    ValueError("not json"), {"unexpected": True}])
def test_a_refusal_or_a_foreign_answer_ends_the_wait_at_once(answer) -> None:
    server = FakeServer([answer])
    with pytest.raises(RemoteError, match="lost the submission"):
        _follow(server, [])
    assert server.asked == 1

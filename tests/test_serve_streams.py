"""Live streams under a fake clock: a client that stops reading is dropped after the stall
deadline without holding back the others, and a disconnect ends its stream at once."""

from __future__ import annotations

from types import SimpleNamespace

import trio
import trio.testing

from arena.serve.live import EventStream, StoreFollower


class Version:
    """A store version the test moves by hand."""

    def __init__(self) -> None:
        self.value: tuple = (1,)
        self.parts: dict = {}

    def current(self) -> tuple:
        return self.value

    def tags(self) -> dict:
        return {}

    def close(self) -> None:
        pass


def test_a_stalled_stream_is_closed_and_the_others_get_every_event() -> None:
    version = Version()
    follower = StoreFollower(version, interval=0.1)
    scope = {"type": "http", "app": SimpleNamespace(state=SimpleNamespace(follower=follower))}
    stream = EventStream(stall_s=2.0, keepalive_s=15.0)
    got: dict[str, list[bytes]] = {"reader": [], "stalled": [], "gone": []}
    ended: dict[str, float] = {}
    gone = trio.Event()

    def sender(name: str, takes: int):
        async def send(message: dict) -> None:
            if message["type"] == "http.response.body":
                if len(got[name]) >= takes:
                    await trio.sleep_forever()  # its buffers are full: the send never returns
                got[name].append(message["body"])
        return send

    async def receive_until(event: trio.Event | None):
        async def receive() -> dict:
            if event is None:
                await trio.sleep_forever()
            await event.wait()
            return {"type": "http.disconnect"}
        return receive

    async def client(name: str, takes: int, event: trio.Event | None) -> None:
        await stream(scope, await receive_until(event), sender(name, takes))
        ended[name] = trio.current_time()

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follower.run)
            await trio.sleep(0.05)
            nursery.start_soon(client, "reader", 1000, None)
            nursery.start_soon(client, "stalled", 2, None)  # takes the hello and one event, then stops
            nursery.start_soon(client, "gone", 1000, gone)
            start = trio.current_time()
            for k in range(2, 8):
                version.value = (k,)
                await trio.sleep(1.0)
                if k == 3:
                    gone.set()
            assert "reader" not in ended
            assert ended["stalled"] - start < 2 + 2.5  # dropped a stall deadline after its send stuck
            assert ended["gone"] - start < 3  # its disconnect, at once
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    events = [b for b in got["reader"] if b.startswith(b"event: store")]
    assert len(events) == 6 and got["reader"][0].startswith(b"retry:")  # every version, none held back
    assert [b'"serial": %d' % k in e for k, e in enumerate(events, 2)] == [True] * 6  # 1: before the streams
    assert len(got["stalled"]) == 2

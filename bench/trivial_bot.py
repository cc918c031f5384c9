"""The benchmarks' trivial bot: answers every request with its first action.

A real program speaking the protocol, as cheap as a Python bot can be, so that what a
benchmark measures is the arena. ``python3 trivial_bot.py [NAME]``.
"""
import json
import sys

name = sys.argv[1] if len(sys.argv) > 1 else "trivial"
for line in sys.stdin:
    msg = json.loads(line)
    kind = msg["type"]
    if kind == "hello":
        print('{"type":"hello","protocol":1,"name":"%s","version":"1"}' % name, flush=True)
    elif kind == "request":
        print('{"type":"action","request":%d,"action":0}' % msg["id"], flush=True)
    elif kind == "shutdown":
        break

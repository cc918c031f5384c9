"""Bots as processes: what a bot is, how it is started, limited, contained, watched and killed.

* :mod:`.manifest` - a bot's ``bot.toml`` (:class:`~.manifest.BotSpec`) and the bundled bots;
  :mod:`.limits` - the numbers a bot is held to;
* :mod:`.launch` - how a bot is started: its containment, its interpreter, its contained build;
* :mod:`.start` - :func:`~.start.start_bot`; :mod:`.spawn` - the fork itself;
* :mod:`.channel` - a bot's output as lines and faults, without I/O; :mod:`.process` - a running
  bot (:class:`~.process.BotBase`): its pipes, clock, CPU and teardown; :mod:`.blocking` - the
  one shell that waits for it with ``poll`` (:class:`~.blocking.BlockingBot`, a
  :class:`~.blocking.Hub` per thread); :mod:`.errors` - how it misbehaves;
* :mod:`.probes` - which containment works here; :mod:`.containment` - this process's uid
  registry, cgroup root and bubblewrap, and the cleanup after a referee that died;
* the mechanisms, synchronous and cheap: :mod:`.procs` (/proc, attribution, kill),
  :mod:`.cgroups`, :mod:`.uids` (private uids, the run directory), :mod:`.filesystem` (what a
  contained bot sees), :mod:`.bwrap` and :mod:`.namespaces` (the two containments);
* :mod:`.bundles` - a bot's files packed for a Dask worker and unpacked there.

Nothing here knows the game: the referee (:mod:`arena.referee`) speaks the protocol over a
:class:`~.blocking.BlockingBot`. docs/SANDBOX.md says what each containment enforces.
"""

"""Playing strength for the reference bots: an engine-level heuristic, a learned setup
table, card-counting determinization, flat Monte Carlo and information-set MCTS.

Everything here works on engine objects (``State``, actions) because simulations run
thousands of moves per decision and JSON would dominate the cost. The bots stay fair:
they only ever build states from what a request shows them (:mod:`arena.ai.observe`).
Importing this package loads nothing heavy, so bots that use it start fast.

The learned bot (:mod:`.learned`) reads a request through the fixed action space
(:mod:`.actions`) and the observation features (:mod:`.features`) it was trained on; the
environments (:mod:`arena.envs`) wrap the same two, so they live here, below them.
"""

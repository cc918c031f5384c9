"""Playing strength for the reference bots: an engine-level heuristic, a learned setup
table, card-counting determinization, flat Monte Carlo and information-set MCTS.

Everything here works on engine objects (``State``, actions) because simulations run
thousands of moves per decision and JSON would dominate the cost. The bots stay fair:
they only ever build states from what a request shows them (:mod:`arena.ai.observe`).
Importing this package loads nothing heavy, so bots that use it start fast.
"""

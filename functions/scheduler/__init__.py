"""Domain package of the job scheduler, shared by every Lambda, local mode and the CLI.

Layers, one way only: handlers (``functions/*_handler.py``) and local mode (``local/``), composed
by ``wiring`` -> logic (``runner/``, ``api/``, ``service``, ``planning/``) -> data access
(``store/``, through ``ports``) -> SQL files (``sql/``); delivery in ``targets/``. The rooms and
their arrows: docs/architecture.md.
"""

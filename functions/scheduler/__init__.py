"""Domain package of the job scheduler, shared by every Lambda, local mode and the CLI.

Layers, one way only: handlers (``functions/*_handler.py``) -> logic (``runner``, ``executor``,
``api``) -> data access (``store``) -> SQL files (``sql/``).
"""

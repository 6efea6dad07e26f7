"""The chat (``mibyan chat``, :mod:`pipeline.cli.cmd_chat`): an interactive session in the
terminal (prompt_toolkit and rich, the ``chat`` extra, imported only when a chat starts), or
plain line by line without one.

* ``options``: how the chat's agents are built; ``build``: one of them;
* ``session``: the chat's agent, its turns (on a worker thread; Ctrl-C interrupts), input;
* ``slash``: the table of slash commands (``register`` adds one);
* ``listen`` and ``display``/``render``: events to what is shown, plain or rich;
* ``terminal``: the terminal's prompts; ``piped``: stdin line by line;
* ``steering``: what a line typed into a running turn does; ``steerline``: the terminal's
  input line while a turn runs;
* ``inline``: approvals and ``clarify`` questions asked inline;
* ``text``: short texts, the line after each turn (its cost from :mod:`pipeline.insights.prices`).
"""

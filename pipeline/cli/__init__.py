"""The ``mibyan`` command line: the parser and each command's body."""

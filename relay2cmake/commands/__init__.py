"""The commands behind the CLI: ``gen`` (``generate.py``, with its self-check and the search
for a diverging operator), ``tune``, ``inspect`` and ``demo``, and running CMake the way a user
does (``cmake_runner.py``). ``cli.py`` imports them lazily, after checking flags and files."""

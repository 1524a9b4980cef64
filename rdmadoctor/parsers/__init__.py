"""Readers of recorded tool output (what users paste into tickets, or a bundle's ``cmd/`` files).

One module per tool family; each public ``parse_*`` function takes the output as ``str``
(callers decode bytes with ``errors="replace"``), never raises, and returns a
:class:`rdmadoctor.core.facts.Parsed` holding plain facts plus what looked wrong in the input.
Regular expressions are compiled on first use (through ``re``'s cache), so importing a
parser module costs next to nothing on the every-minute check path.
"""

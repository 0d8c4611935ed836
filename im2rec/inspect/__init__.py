"""Looking at and taking apart finished ``.rec`` files.

Modules: :mod:`.scanning` (walking frames: ``rec index``, ``rec verify``,
``rec info``, with damage recovery), :mod:`.unpacking` (``rec unpack``),
:mod:`.merging` (``rec merge``) and :mod:`.sheets` (``rec show``).
"""

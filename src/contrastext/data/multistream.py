"""Repack a single-stream dump as a multistream dump + index, the way Wikipedia publishes them.

``*-multistream.xml.bz2`` is a concatenation of bz2 streams: the ``<mediawiki>``/``<siteinfo>`` header, then
streams of ``pages_per_stream`` ``<page>`` elements, then the closing ``</mediawiki>``. The index
(``*-multistream-index.txt.bz2``) has one line ``offset:page_id:title`` per page, ``offset`` being the byte
offset of the stream holding it. Readers use the index to split one dump among many tasks.
"""

from __future__ import annotations

import bz2
import re
from pathlib import Path
from typing import Iterable, Iterator

from contrastext.data.wikipedia import compression_of, decompressed

_ID = re.compile(rb"<id>(\d+)</id>")
_TITLE = re.compile(rb"<title>(.*?)</title>", re.S)


def split_dump(path: str | Path) -> tuple[bytes, Iterator[bytes]]:
    """The header (everything before the first ``<page>``) and an iterator over ``<page>`` element bytes."""
    f = open(path, "rb")
    lines = _lines(decompressed(f, 0, None, compression_of(str(path))))
    header: list[bytes] = []
    for line in lines:
        if line.strip() == b"<page>":
            return b"\n".join(header) + b"\n", _pages(line, lines, f)
        header.append(line)
    f.close()
    return b"\n".join(header) + b"\n", iter(())


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    pending = b""
    for data in chunks:
        pending += data
        *lines, pending = pending.split(b"\n")
        yield from lines
    if pending:
        yield pending


def _pages(first: bytes, lines: Iterator[bytes], f) -> Iterator[bytes]:
    with f:
        block = [first]
        for line in lines:
            if block is None:
                if line.strip() == b"<page>":
                    block = [line]
                continue
            block.append(line)
            if line.strip() == b"</page>":
                yield b"\n".join(block) + b"\n"
                block = None


def write_multistream(header: bytes, pages: Iterable[bytes], out: str | Path, index: str | Path,
                      pages_per_stream: int = 100) -> int:
    """Write ``out`` (multistream .xml.bz2) and ``index`` (.txt.bz2); returns the number of streams of pages."""
    streams = 0
    index_lines: list[str] = []
    with open(out, "wb") as f:
        f.write(bz2.compress(header if header.strip() else b"<mediawiki>\n"))
        batch: list[bytes] = []

        def flush() -> None:
            nonlocal streams
            if not batch:
                return
            offset = f.tell()
            for page in batch:
                page_id = _ID.search(page)
                title = _TITLE.search(page)
                index_lines.append(f"{offset}:{page_id.group(1).decode() if page_id else 0}:"
                                   f"{title.group(1).decode('utf-8', 'replace') if title else ''}")
            f.write(bz2.compress(b"".join(batch)))
            streams += 1
            batch.clear()

        for page in pages:
            batch.append(page)
            if len(batch) == pages_per_stream:
                flush()
        flush()
        f.write(bz2.compress(b"</mediawiki>\n"))
    with bz2.open(index, "wt", encoding="utf-8") as f:
        f.write("\n".join(index_lines) + "\n")
    return streams


def repack_as_multistream(source: str | Path, out: str | Path, index: str | Path, pages_per_stream: int = 100) -> int:
    """Single-stream dump ``source`` → multistream ``out`` + ``index``."""
    header, pages = split_dump(source)
    return write_multistream(header, pages, out, index, pages_per_stream)

"""Writing a MediaWiki ``-multistream.xml.bz2`` dump and its index, as Wikimedia lays them out
(for the multistream tests and the Wikipedia benchmark; the product only reads such dumps)."""

from __future__ import annotations

import bz2
from pathlib import Path

ROOT_CLOSE = "</mediawiki>\n"


def write_multistream_dump(
    header: str, pages: list[str], dump: Path, index: Path, pages_per_stream: int
) -> None:
    """Writes ``dump``: one bz2 stream of ``header`` (the XML through ``</siteinfo>``), then
    streams of ``pages_per_stream`` pages (each a whole ``<page>...</page>``), the last one
    closing the root; and ``index``: bz2 lines ``offset:page id:title``, the byte offset of the
    stream that holds the page."""
    blobs = [bz2.compress(header.encode())]
    lines, offset = [], len(blobs[0])
    for i in range(0, len(pages), pages_per_stream):
        group = pages[i : i + pages_per_stream]
        last = i + pages_per_stream >= len(pages)
        blob = bz2.compress(("".join(group) + (ROOT_CLOSE if last else "")).encode())
        for page in group:
            page_id = page.split("<id>", 1)[1].split("</id>", 1)[0]
            title = page.split("<title>", 1)[1].split("</title>", 1)[0]
            lines.append(f"{offset}:{page_id}:{title}")
        blobs.append(blob)
        offset += len(blob)
    dump.write_bytes(b"".join(blobs))
    index.write_bytes(bz2.compress(("\n".join(lines) + "\n").encode()))

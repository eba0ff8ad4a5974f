"""mkdocs hooks (``mkdocs.yml``: ``hooks``): the benchmarks page's generated parts.

- ``<!-- reproduce-table -->`` becomes ``benchmarks/results/reproduce.md`` as ``benchmarks/reproduce.py`` wrote it
  (the same rows, never retyped);
- ``<!-- reproduce-curves -->`` becomes the rows' learning curves, ``benchmarks/results/reproduce_*.png``;
- every PNG of ``benchmarks/results/`` is served at ``results/NAME.png`` beside the page, so the page can show it.
"""

from __future__ import annotations

import pathlib

from mkdocs.structure.files import File

RESULTS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def on_files(files, config):
    for picture in sorted(RESULTS.glob("*.png")):
        files.append(
            File(
                f"results/{picture.name}",
                src_dir=str(RESULTS.parent),
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )
    return files


def on_page_markdown(markdown, page, config, files):
    if "<!-- reproduce-table -->" in markdown:
        markdown = markdown.replace("<!-- reproduce-table -->", (RESULTS / "reproduce.md").read_text())
    if "<!-- reproduce-curves -->" in markdown:
        curves = sorted(RESULTS.glob("reproduce_*.png"))
        shown = "\n".join(f'![{p.stem.removeprefix("reproduce_")}](results/{p.name}){{ width="32%" }}' for p in curves)
        markdown = markdown.replace("<!-- reproduce-curves -->", shown)
    return markdown

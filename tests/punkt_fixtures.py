"""Hand-made Punkt parameters shared by the splitter and the Punkt-file tests."""

from __future__ import annotations

from pathlib import Path

from nltk.tokenize.punkt import PunktParameters

from pipeline.files.punkt_files import save_punkt_parameters


def hand_params() -> PunktParameters:
    """A few abbreviations, collocations, sentence starters and orthographic contexts."""
    params = PunktParameters()
    params.abbrev_types = {"mr", "mrs", "dr", "st", "e.g", "i.e", "etc"}
    params.collocations = {("##number##", "january"), ("s", "bach")}
    params.sent_starters = {"however", "the"}
    params.ortho_context.update({"darcy": 4, "the": 42, "élan": 3, "zero": 0})
    return params


def write_tables(directory: Path, params: PunktParameters) -> Path:
    """``params`` saved as punkt_tab tables in ``directory`` (returned)."""
    save_punkt_parameters(params, directory)
    return directory

"""The processor a run records (``run_meta.json``'s ``device``; the precision probe's cache key): the
first core's name with its family and model, which tell apart the processors one name covers."""
from __future__ import annotations

import platform

from agnostophobia.training.device import cpu_model

TWO_CORES = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 167
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu avx512_bf16 amx_bf16

processor\t: 1
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Another Processor
"""


def test_the_first_cores_name_family_and_model(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(TWO_CORES)
    assert cpu_model(info) == "Intel(R) Xeon(R) Processor (family 6, model 167)"


def test_a_processor_without_family_numbers_keeps_its_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14 96-Core Processor\n")  # an excerpt: no family
    assert cpu_model(info) == "AMD EPYC 9R14 96-Core Processor"


def test_without_cpuinfo_pythons_name(tmp_path):
    assert cpu_model(tmp_path / "absent") == (platform.processor() or platform.machine())

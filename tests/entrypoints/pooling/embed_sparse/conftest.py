# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project
import pytest


@pytest.fixture()
def should_do_global_cleanup_after_test() -> bool:
    """No global cleanup after each test (vLLM's conftest: ~1 s a test on
    a CPU): these tests run their servers in processes of their own, and
    vllm_runner cleans up after its engine itself."""
    return False

# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright contributors to the vLLM project

import pytest
import torch

from vllm.entrypoints.pooling.utils import check_json_floats
from vllm.exceptions import VLLMValidationError
from vllm.outputs import PoolingOutput, PoolingRequestOutput


def _outputs(*shapes: tuple[int, ...]) -> list[PoolingRequestOutput]:
    return [
        PoolingRequestOutput(
            request_id=str(i),
            outputs=PoolingOutput(data=torch.zeros(shape)),
            prompt_token_ids=[0],
            num_cached_tokens=0,
            finished=True,
        )
        for i, shape in enumerate(shapes)
    ]


def test_counts_every_float_of_the_response():
    # Per-token outputs of two requests: 2 x 3 x 5 + 4 x 5 = 50 floats.
    outputs = _outputs((2, 3, 5), (4, 5))
    check_json_floats(outputs, 50)
    with pytest.raises(VLLMValidationError) as e:
        check_json_floats(outputs, 49)
    message = str(e.value)
    assert "50 floats" in message
    assert "--max-pooling-json-floats (49)" in message
    assert '"base64" or "bytes"' in message


@pytest.mark.parametrize("max_floats", [None, 0])
def test_no_limit(max_floats: int | None):
    check_json_floats(_outputs((10**3, 10**3)), max_floats)

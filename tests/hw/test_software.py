from dgxperf.hw.software import collect_software, parse_build_settings, relevant_env

TORCH_CONFIG = """PyTorch built with:
  - GCC 13.3
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, CUDA_FLAGS= -gencode arch=compute_90,code=sm_90 -O2, \
CUDA_VERSION=13.0, CUDNN_VERSION=9.24.0, TORCH_VERSION=2.14.1, USE_CUDA=1, USE_CUDNN=ON, USE_NCCL=ON, \
USE_NUMA=OFF,
"""


def test_parse_build_settings_keeps_values_with_commas_and_spaces():
    settings = parse_build_settings(TORCH_CONFIG)
    assert settings["USE_CUDA"] == "1"
    assert settings["USE_NCCL"] == "ON"
    assert settings["CUDA_VERSION"] == "13.0"
    assert settings["CUDA_FLAGS"].startswith("-gencode arch=compute_90")
    assert parse_build_settings("no settings here") == {}


def test_relevant_env_keeps_only_stack_variables():
    env = {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0", "AWS_SECRET_ACCESS_KEY": "x", "HOME": "/root"}
    assert relevant_env(env) == {"CUDA_VISIBLE_DEVICES": "0", "NCCL_DEBUG": "INFO"}


def test_collect_software_reads_the_installed_torch():
    software = collect_software()
    torch = software["torch"]
    assert torch["installed"] is True
    assert torch["version"].startswith("2.")
    assert "USE_CUDA" in torch["build_settings"]
    assert isinstance(torch["gloo_backend"], bool)

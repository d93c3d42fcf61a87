FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY domain domain
COPY commands commands
COPY projections projections
COPY publishers publishers
COPY api api
RUN pip install --no-cache-dir .
EXPOSE 8181
CMD ["icelog", "serve", "--host", "0.0.0.0", "--port", "8181"]

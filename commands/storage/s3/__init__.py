"""The `s3` storage kind (AWS S3 and S3-compatible stores)."""

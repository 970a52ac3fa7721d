"""Static files and uploads: surge beside nginx, granian and Starlette (`make bench`)."""

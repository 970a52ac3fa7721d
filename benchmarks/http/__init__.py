"""HTTP hello-world benchmark: surge vs socketify, granian, uvicorn, aiohttp, nginx, fasthttp."""

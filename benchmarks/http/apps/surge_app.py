"""surge's benchmark app.

Served as ``surge serve benchmarks.http.apps.surge_app:app --workers 1``.
"""

from surge.http import App

app = App()


@app.get("/")
def hello(request):
    return "Hello, world!"


@app.get("/json")
def j(request):
    return {"message": "Hello, world!"}


@app.get("/user/{id:int}")
async def user(request, id):
    return f"user {id}"

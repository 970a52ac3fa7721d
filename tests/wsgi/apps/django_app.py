"""A real Django project in one file for the WSGI tests: a slow view (seed 003) and fast ones."""

from __future__ import annotations

import time

from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="surge-tests-only",
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["*"],
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    INSTALLED_APPS=[],
    USE_TZ=True,
)

from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse, JsonResponse  # noqa: E402
from django.urls import path  # noqa: E402
from django.views.decorators.csrf import csrf_exempt  # noqa: E402


def slow(request):
    time.sleep(2)
    return JsonResponse({"slept": 2})


def fast(request):
    return HttpResponse("fast")


@csrf_exempt
def form(request):
    return JsonResponse({"post": request.POST.dict(), "get": request.GET.dict()})


urlpatterns = [path("slow", slow), path("fast", fast), path("form", form)]

app = get_wsgi_application()

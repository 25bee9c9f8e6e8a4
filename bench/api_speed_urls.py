"""The URL map of bench/api_speed.py: the service's own routes plus /bench/bare/, a DRF endpoint
that returns a constant through the same middleware, authentication and throttle: the stack's
own limit, against which GET /api/v1/gates/{id}/ is measured."""

from django.urls import include, path
from rest_framework.response import Response
from rest_framework.views import APIView


class BareApi(APIView):
    def get(self, request):
        return Response({"ok": True})


urlpatterns = [
    path("bench/bare/", BareApi.as_view()),
    path("", include("config.urls")),
]

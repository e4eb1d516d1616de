from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView

from annotation.health import study_health_view
from config.api_docs import SwaggerView
from config.health import healthz


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on every page (the admin's too): the static file, cached by its URL."""
    return redirect(static("favicon.ico"), permanent=True)


urlpatterns = [
    path("favicon.ico", favicon, name="favicon"),
    # The study health panel (annotation/health.py) under the admin's address, before the admin's own.
    path("admin/health/<int:study_id>/", admin.site.admin_view(study_health_view), name="study-health"),
    path("admin/", admin.site.urls),
    # Researchers sign in here without being staff (the admin's own sign-in refuses them). The form
    # authenticates through django.contrib.auth.authenticate, so login throttling covers it too.
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/research/", include("analysis.api.urls")),
    path("api/v1/", include("studies.api.urls")),
    path("api/v1/", include("annotation.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SwaggerView.as_view(url_name="schema"), name="api-docs"),
    # Redoc cannot run under the Content-Security-Policy (config/api_docs.py): its address shows Swagger UI.
    path("api/redoc/", RedirectView.as_view(pattern_name="api-docs"), name="api-redoc"),
    path("research/", include("analysis.urls")),
    path("healthz/", healthz, name="healthz"),
    path("", include("annotation.urls")),
]

admin.site.site_header = "Satisfy administration"
admin.site.site_title = "Satisfy"
admin.site.index_title = "Studies, annotators and generation jobs"

# Django's 404 page, except under /api/, where a path no view matches is the API's JSON error.
handler404 = "kernel.exception_handlers.page_not_found"
# The database out of reach (a restart, a failover): 503 and a page that tries again, not a 500 (kernel/unavailable.py).
handler500 = "kernel.unavailable.server_error"

from django.urls import path

from analysis import views

app_name = "analysis"

urlpatterns = [
    path("", views.study_list, name="studies"),
    path("token/", views.api_token, name="token"),
    path("studies/<slug:slug>/", views.study_dashboard, name="study"),
    path("studies/<slug:slug>/jobs/", views.job_start, name="job-start"),
    path("studies/<slug:slug>/report/", views.latest_report, name="report"),
    path(
        "studies/<slug:slug>/participations/<str:code>/exclusion/",
        views.participation_exclusion,
        name="participation-exclusion",
    ),
    path("jobs/<int:job_id>/status/", views.job_status, name="job-status"),
    path("jobs/<int:job_id>/cancel/", views.job_cancel, name="job-cancel"),
    path("jobs/<int:job_id>/files/<path:name>", views.job_file, name="job-file"),
    path("scoring/<int:run_id>/status/", views.scoring_status, name="scoring-status"),
]

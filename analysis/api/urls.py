from django.urls import path

from analysis.api import views

urlpatterns = [
    path("studies/<slug:slug>/comparisons/", views.ComparisonsApi.as_view(), name="research-comparisons"),
    path("studies/<slug:slug>/jobs/", views.JobsApi.as_view(), name="research-jobs"),
    path("studies/<slug:slug>/scoring-runs/", views.ScoringRunsApi.as_view(), name="research-scoring-runs"),
    path("jobs/<int:job_id>/", views.JobApi.as_view(), name="research-job"),
    path("jobs/<int:job_id>/cancel/", views.JobCancelApi.as_view(), name="research-job-cancel"),
    path("jobs/<int:job_id>/files/<path:name>", views.JobFileApi.as_view(), name="research-job-file"),
]

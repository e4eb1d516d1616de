from django.urls import path

from annotation import views

app_name = "annotation"

urlpatterns = [
    path("", views.home, name="home"),
    path("join/<str:token>/", views.join, name="join"),
    path("open/<str:token>/", views.open_join, name="open-join"),
    path("resume/<str:token>/", views.resume, name="resume"),
    path("study/<slug:slug>/screening/", views.screening, name="screening"),
    path("study/<slug:slug>/preview/", views.preview, name="preview"),
    path("study/<slug:slug>/resume-link/", views.resume_link_replace, name="resume-link"),
    path("study/<slug:slug>/", views.study, name="study"),
    path("study/<slug:slug>/profile/", views.profile, name="profile"),
    path("study/<slug:slug>/practice/", views.practice_round, name="practice"),
    path("study/<slug:slug>/ask/", views.ask, name="ask"),
    path("study/<slug:slug>/q/<int:index>/wait/", views.wait, name="wait"),
    path("study/<slug:slug>/q/<int:index>/status/", views.status, name="status"),
    path("study/<slug:slug>/q/<int:index>/retry/", views.retry, name="retry"),
    path("study/<slug:slug>/q/<int:index>/discard/", views.discard, name="discard"),
    path("study/<slug:slug>/q/<int:index>/compare/", views.compare, name="compare"),
    path("study/<slug:slug>/stop/", views.stop, name="stop"),
    path("study/<slug:slug>/finish/", views.finish, name="finish"),
    path("study/<slug:slug>/done/", views.done, name="done"),
]

from django.urls import path

from devhooks.widget import stream, views

urlpatterns = [
    path("widget/lang/<str:language>.json", views.catalogue, name="widget-catalogue"),
    path("widget/<str:widget_id>.js", views.script, name="widget-script"),
    path("widget/<str:widget_id>/v1/<str:action>", views.visitor_api, name="widget-api"),
    path("visitor/<str:token>/stream", stream.visitor_stream, name="visitor-stream"),
]

from django.contrib import admin

from corpus.models import CorpusDocument


@admin.register(CorpusDocument)
class CorpusDocumentAdmin(admin.ModelAdmin):
    list_display = ("external_id", "title", "year", "updated_at")
    list_filter = ("year",)
    search_fields = ("=external_id", "title")
    readonly_fields = ("created_at", "updated_at")
    show_full_result_count = False  # counting a million rows on every page is slow

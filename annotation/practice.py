"""The practice round's fixed example: one abstract, two fixed summaries and the feedback after a choice.
Shown before the first question where the study asks for it; the choice is never stored or analysed."""

from __future__ import annotations

from django.utils.translation import gettext_lazy as _

QUESTION = _("Does regular exercise improve sleep quality in older adults?")
SOURCE_TITLE = _("Moderate aerobic exercise and sleep in adults over 60: a randomised controlled trial")
SOURCE_ABSTRACT = _(
    "We randomly assigned 120 adults aged 60 to 80 with mild sleep complaints to 16 weeks of moderate aerobic "
    "exercise (four 40-minute sessions a week) or to a stretching control. Sleep quality was measured with the "
    "Pittsburgh Sleep Quality Index. The exercise group fell asleep faster (by about 12 minutes) and reported "
    "better overall sleep quality than the control group; night-time awakenings did not differ. Benefits "
    "appeared after eight weeks. Participants with the worst sleep at the start improved most."
)
# The better answer to the question, on the left; the other is fluent but off the question's point.
GOOD_SUMMARY = _(
    "Yes, for older adults with mild sleep complaints: in a trial of 120 people aged 60 to 80, 16 weeks of "
    "moderate aerobic exercise improved overall sleep quality and shortened the time to fall asleep by about "
    "12 minutes compared with stretching [1]. It took about eight weeks to show, and it did not reduce waking "
    "up at night [1]."
)
POOR_SUMMARY = _(
    "Exercise has many benefits for health. Researchers studied adults and measured several outcomes with a "
    "questionnaire. The study lasted 16 weeks and included a stretching group. More research on exercise is "
    "always needed [1]."
)
BETTER_CHOICE = "left"
FEEDBACK = _(
    "The left (top) summary is the better choice: it answers the question directly, gives the size of the "
    "effect and for whom it holds, says what did not improve, and cites its source for each claim. The other "
    "summary is fluent but never says whether exercise helped sleep. In the study, judge the summaries the same "
    "way, for your own question and your own needs: which one would you rather rely on? Choose “neither” when "
    "neither answers your question, and, where it is offered, “both equally good” only when you truly have "
    "no preference."
)

"""Boundary repair of extracted spans: the cut-short answers of the evidence-quality issue, real RAMDocs
documents, and properties over any text and span."""

from __future__ import annotations

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from training.utils.spans import (
    COUNTED_PEOPLE,
    MAX_NAME_WORDS,
    MAX_PLACE_PARTS,
    MAX_PLACE_WORDS,
    asks_for_place,
    asks_for_sport,
    repair_span,
)


def _repair(text: str, part: str, question: str | None = None) -> str:
    a = text.index(part)
    s, e = repair_span(text, a, a + len(part), question)
    return text[s:e]


def test_cut_short_answers_become_whole_answers():
    assert _repair("The winner was Ahmed Hussen of Ethiopia.", "Ahmed") == "Ahmed Hussen"
    assert _repair("The singer Park Ji-yeon debuted in 2009.", "Ji-yeon") == "Park Ji-yeon"
    assert _repair("It was founded on October 12, 1666 by the king.", "12, 1666") == "October 12, 1666"
    assert _repair("It was founded on October 12, 1666 by the king.", "October 12") == "October 12, 1666"
    assert _repair("born on 5 March 2001 in Oslo", "5 March") == "5 March 2001"
    assert _repair("Baby Doll was directed by Elia Kazan in 1956.", "Kazan") == "Elia Kazan"
    assert _repair("the works of Leonardo da Vinci are", "Leonardo") == "Leonardo da Vinci"
    assert _repair("a town in Aguadilla, Puerto Rico today", "Puerto Rico") == "Puerto Rico"  # comma: stop
    assert _repair("It is a footballer", "footbal") == "footballer"  # a word piece grows to the word


def test_function_words_headings_and_punctuation_do_not_join():
    assert _repair("In Paris he met her.", "Paris") == "Paris"
    assert _repair("He met The Beatles", "Beatles") == "Beatles"  # "The" is a function word
    assert _repair("SPORTS BASEBALL Football", "Football") == "Football"  # ALL-CAPS never joins
    assert _repair('"Needtobreathe album) X', "Needtobreathe album)") == "Needtobreathe album"
    assert _repair("answer: 1,000, they said", "1,000,") == "1,000"


def test_a_place_answer_takes_its_comma_joined_names_only_when_the_question_asks_for_a_place():
    where = "Where is the Larkin Covered Bridge located?"
    text = "The bridge crosses Pine Creek in Chester Springs, Pennsylvania, over a mill race."
    assert _repair(text, "Pennsylvania", where) == "Chester Springs, Pennsylvania"
    assert _repair(text, "Chester Springs", where) == "Chester Springs, Pennsylvania"  # stops at "over"
    assert _repair(text, "Pennsylvania", "Who built the bridge?") == "Pennsylvania"
    assert _repair(text, "Pennsylvania") == "Pennsylvania"
    assert _repair("YHSS is a school in Thimphu, Bhutan. It opened in 1977.", "Thimphu", where) == (
        "Thimphu, Bhutan"
    )  # a full stop ends it
    text = "Mahkota is a town in Cheras, Selangor, Malaysia, Asia, Earth."
    assert _repair(text, "Selangor", "What region is Mahkota in?") == "Cheras, Selangor, Malaysia"
    assert len(_repair(text, "Asia", where).split(", ")) == MAX_PLACE_PARTS
    # a name that opens a sentence does not join from the left; a number never joins
    assert _repair("It was moved. Later, Paris took it.", "Paris", where) == "Paris"
    assert _repair("In 1990, Paris took it.", "Paris", where) == "Paris"
    # lists of people are not places: "Who" questions keep the comma as an end
    assert _repair(
        "produced by Timbaland, Justin Timberlake and Nate Hills", "Timbaland", "Who produced it?"
    ) == ("Timbaland")
    words = " ".join(["Alpha Beta Gamma Delta"] * 1)
    long = f"It lies in {words}, Epsilon Zeta Eta Theta, Iota Kappa."
    assert len(_repair(long, "Epsilon Zeta Eta Theta", where).split()) <= MAX_PLACE_WORDS


def test_a_name_in_a_titles_bracket_joins_up_to_the_bracket():
    assert _repair("Crazy World (Boys Like Girls album) Crazy World is", "Like Girls") == "Boys Like Girls"
    assert _repair("Iconoclast (Symphony X album) Iconoclast is the eighth", "X") == "Symphony X"
    # a place in a title's bracket does not grow over the names before it (measured: "Chester Springs,
    # Pennsylvania" lost the backing of a chunk that names only the state, and the planted copy won)
    where = "Where is the Larkin Covered Bridge located?"
    text = "Larkin Covered Bridge (Chester Springs, Pennsylvania) Larkin Covered Bridge is a Burr truss"
    assert _repair(text, "Pennsylvania", where) == "Pennsylvania"
    # a quote is no bracket: a headline's capitalized words are not one name
    assert _repair('^ "Top Democratic in Colorado Capitol says', "Democratic") == "Democratic"
    # nothing left of the bracket joins
    assert _repair("Bryan Adams (Singer Songwriter) was", "Songwriter") == "Singer Songwriter"


def test_dates_take_their_day_and_life_dates_keep_the_asked_one():
    text = "Elisabeth ( citation needed ] 28 May 1860 – 7 February 1881 ) was the Duchess"
    span = "1860 – 7 February 1881"
    assert _repair(text, span, "When was Princess Elisabeth born?") == "28 May 1860"
    assert _repair(text, span, "What is her birth date?") == "28 May 1860"
    assert _repair(text, span, "When did Princess Elisabeth die?") == "7 February 1881"
    assert _repair(text, span, "When was she Duchess?") == span  # a range, unless a birth or death is asked
    assert _repair(text, span) == span
    assert _repair("born in May 1860 in Paris", "1860") == "May 1860"
    assert _repair("on 3 March, 1999 he left", "March, 1999") == "3 March, 1999"
    assert _repair("from 1840-1843 he served", "1840-1843", "When was he born?") == "1840-1843"
    assert _repair("page 12 of 1999", "1999") == "1999"


def test_real_ramdocs_life_dates_repair_to_the_asked_date(shared_data):
    """Every real RAMDocs document that states its labelled answer as one end of "date – date" life dates,
    for a question about a birth or a death: a span over both dates repairs to the answer."""
    import re

    month = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
    date = r"\d{1,2} " + month + r" \d{4}|" + month + r" \d{1,2}, \d{4}"
    life = re.compile(r"(" + date + r") – (" + date + r")")
    checked = 0
    for line in (shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        asks = re.search(r"\b(born|birth|died|die|death)\b", q["question"])
        if not asks:
            continue
        for doc in q["documents"]:
            for m in life.finditer(doc["text"]):
                which = 1 if asks.group(1) in ("born", "birth") else 2
                if m.group(which) != doc["answer"]:
                    continue
                got = doc["text"][slice(*repair_span(doc["text"], m.start(), m.end(), q["question"]))]
                assert got == doc["answer"], (q["question"], m.group(0))
                checked += 1
    assert checked >= 5


def test_place_questions_are_told_by_their_words():
    assert asks_for_place("Where is YHSS located?")
    assert asks_for_place("What is the region of Forum Iulii?")
    assert asks_for_place("In which country is Pilzno?")
    assert not asks_for_place("Who is the artist of the album Shock Value?")
    assert not asks_for_place("What is the population of Pilzno?")
    assert not asks_for_place(None) and not asks_for_place("")


def test_sport_questions_are_told_by_their_words():
    assert asks_for_sport("What sport is Nathan Wood associated with?")
    assert asks_for_sport("Which sports did she play?") and asks_for_sport("What kind of sport is hurling?")
    assert not asks_for_sport("What is the sport's governing body called in Who's Who?")
    assert not asks_for_sport("Who won the 2013 China Open?") and not asks_for_sport(None)


def test_a_players_title_becomes_the_sport_only_when_the_question_asks_for_one():
    q = "What sport is Pekka Niemi known for?"
    text = "Pekka Niemi was a Finnish skier. Ski jumping is not cross-country skiing."
    assert _repair(text, "skier", q) == "skiing"  # the activity before the bare stem "Ski"
    assert _repair(text, "skier", "Who is Pekka Niemi?") == "skier"  # not a sport question: untouched
    assert _repair("He was an English footballer who played football.", "footballer", q) == "football"
    assert _repair("A cricketer, he played cricket for Kent.", "cricketer", q) == "cricket"
    assert _repair("She is a tennis player from Spain.", "tennis player", q) == "tennis"
    assert _repair("They were Welsh snooker players in the 1980s.", "snooker players", q) == "snooker"
    # no sport word in the chunk, a bare "player", or a span that already is a sport: unchanged
    assert _repair("Cameron Murray is a semi-professional footballer.", "footballer", q) == "footballer"
    assert _repair("He is a player, playing chess.", "player", q) == "player"
    assert _repair("He played Soccer and soccer was his life.", "Soccer", q) == "Soccer"


def test_real_ramdocs_agent_nouns_repair_to_the_labelled_sport(shared_data):
    """The RAMDocs document of "What sport is William Carrier associated with?" (label "Football") calls
    him a "footballer" and names the "Football League": the span moves to the sport."""
    rows = [json.loads(x) for x in (shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["question"] == "What sport is William Carrier associated with?")
    doc = next(d for d in row["documents"] if "footballer" in d["text"])
    assert doc["answer"] == "Football" and doc["type"] == "correct"
    for m in re.finditer("footballer", doc["text"]):
        s, e = repair_span(doc["text"], m.start(), m.end(), row["question"])
        assert doc["text"][s:e] == "Football"
    # every labelled sport a sport question's document states stays that sport
    checked = 0
    for r in rows:
        if not asks_for_sport(r["question"]):
            continue
        for d in r["documents"]:
            ans = d["answer"]
            for m in re.finditer(rf"(?<!\w){re.escape(ans)}(?!\w)", d["text"]):
                s, e = repair_span(d["text"], m.start(), m.end(), r["question"])
                assert ans in d["text"][s:e]
                checked += 1
    assert checked >= 20


def test_numbers_articles_lines_and_possessives():
    text = "Population ( 2011 ) • Total 40,147 Demonym Wadikar"
    assert _repair(text, "147") == "40,147" and _repair(text, "40") == "40,147"
    assert _repair("had a population of 219,126. Males", "219") == "219,126"
    assert _repair("a total of 1,234,567 people", "234") == "1,234,567 people"  # and takes what it counts
    assert _repair("The population was 2,764 people at the 2010 census.", "2,764") == "2,764 people"
    assert _repair("It had 1,948 inhabitants (2004).", "1,948") == "1,948 inhabitants"
    assert _repair("It had 40,147 residents", "147") == "40,147 residents"
    assert _repair("some 5 km away", "5") == "5"  # a unit is not a count of people
    assert _repair("2,764 peoples", "2,764") == "2,764"  # whole words only
    assert _repair("KSGF-FM (104.1 FM) is a radio station", "104") == "104.1"
    assert _repair("It was founded on October 12, 1666 by", "1666") == "1666"  # a comma and a space: a date
    assert _repair("Pilzno had 4,411, and the gmina 12,878", "4,411") == "4,411"
    assert _repair("in 1896. The town", "1896") == "1896"  # a full stop without digits after it
    assert _repair("Retrieved 2016. ^ The Killers - AllMusic", "The") == "The Killers"
    assert _repair("The band began in 1990", "The") == "The"  # no name after it
    assert _repair("CD review: Coldplay's 'Direct Hits'", "Coldplay's") == "Coldplay"
    assert _repair("a cover of Elvis' version of the song", "Elvis'") == "Elvis"
    assert _repair("the song 'Tears' was", "'Tears'") == "'Tears'"  # a quoted title keeps its quotes
    assert _repair("Director: Quentin Tarantino\nHoward Morris", "Quentin Tarantino\nHoward") == (
        "Quentin Tarantino"
    )


def test_real_ramdocs_numbers_cut_inside_their_groups_grow_back(shared_data):
    """Every grouped number that is a real RAMDocs document's answer ("40,147"): a span of its first or its
    last group repairs to the whole number."""
    import re

    checked = 0
    for line in (shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text(encoding="utf-8").splitlines():
        for doc in json.loads(line)["documents"]:
            text, ans = doc["text"], doc["answer"]
            if not re.fullmatch(r"\d{1,3}(?:,\d{3})+", ans) or text.count(ans) != 1:
                continue
            a = text.index(ans)
            if re.match(r"[\d,.]\d", text[a + len(ans) : a + len(ans) + 2]) or text[a - 1 : a].isdigit():
                continue
            head, tail = ans.split(",")[0], ans.split(",")[-1]
            # the whole number, and the people it counts when they follow ("40,147 people")
            whole = ans + (m.group(0) if (m := COUNTED_PEOPLE.match(text, a + len(ans))) else "")
            assert text[slice(*repair_span(text, a, a + len(head)))] == whole
            end = a + len(ans)
            assert text[slice(*repair_span(text, end - len(tail), end))] == whole
            checked += 1
    assert checked >= 10


def test_names_stop_at_the_word_budget():
    text = "Alpha Beta Gamma Delta Epsilon Zeta were here"
    got = _repair(text, "Gamma")
    assert len(got.split()) == MAX_NAME_WORDS and "Gamma" in got


def test_real_ramdocs_answers_survive_repair(shared_data):
    """On real documents, a span that already is the labelled answer stays that answer (repair never
    breaks a whole answer), for every validation-free RAMDocs document whose label it states once."""
    checked = 0
    for line in (
        (shared_data / "ramdocs" / "RAMDocs_test.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    ):
        for doc in json.loads(line)["documents"]:
            text, ans = doc["text"], doc["answer"]
            if doc["type"] != "correct" or text.count(ans) != 1 or not ans[0].isupper() or " " not in ans:
                continue
            a = text.index(ans)
            before, after = text[a - 1 : a], text[a + len(ans) : a + len(ans) + 1]
            if before.isalnum() or after.isalnum():
                continue
            s, e = repair_span(text, a, a + len(ans))
            assert ans in text[s:e] and len(text[s:e].split()) <= max(len(ans.split()), MAX_NAME_WORDS)
            checked += 1
    assert checked >= 10


@given(
    st.text(max_size=80),
    st.integers(0, 80),
    st.integers(0, 80),
    st.sampled_from([None, "Where is it?", "What sport is it?"]),
)
def test_repair_stays_inside_the_text(text, i, j, question):
    a, b = sorted((i, j))
    s, e = repair_span(text, a, b, question)
    if 0 <= a < b <= len(text):
        assert 0 <= s < e <= len(text)
    else:
        assert (s, e) == (a, b)

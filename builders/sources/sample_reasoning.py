"""Offline multi-source reasoning records, generated from project-written templates.

HotpotQA-style records (fictional people, companies, universities, cities and bands; 2- and
3-hop bridge and comparison questions; eight distractor paragraphs) are emitted in HotpotQA's
own JSON layout, and MMDocRAG-style records (a fictional annual report as text quotes plus
rendered chart and table images) in MMDocRAG's layout, so the sample goes through the same
readers as real data. A few records are deliberately weak (one evidence sentence, or a vague
question) so the query filter has something to drop. Everything is a pure function of the seed.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
from PIL import Image as PILImage, ImageDraw, ImageFont

from mmbench.builders.sources.articles import with_article

FIRST = ("Ada", "Bruno", "Celia", "Dorian", "Elena", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Lionel",
         "Mara", "Nils", "Olga", "Pavel", "Quinn", "Rosa", "Stellan", "Tilde", "Ugo", "Vera", "Wendel", "Xenia",
         "Yannick", "Zora")
LAST = ("Abernethy", "Brannock", "Castellan", "Dunmore", "Everleigh", "Fairweather", "Gallowglass", "Hartwell",
        "Ingleby", "Jessop", "Kettering", "Lockhart", "Marchbanks", "Northcott", "Oakhurst", "Pennywhistle",
        "Quarrington", "Ravenscroft", "Stourbridge", "Thistlewood", "Underhill", "Valcourt", "Whitlock", "Yardley")
CITY = ("Varnholm", "Esterby", "Calder Vale", "Montrique", "Ostrava Nova", "Pellingford", "Quillmere", "Rendshaw",
        "Saltmarsh", "Tarrowgate", "Umberleigh", "Vellichor", "Westermoor", "Ashbourne Cross", "Brightwater",
        "Coldharbour", "Dunraven", "Elmstead", "Foxhollow", "Glenmorrow")
RIVER = ("Aldwyn", "Brisk", "Corran", "Dessel", "Ember", "Fallow", "Greywater", "Hallam", "Iskra", "Jorvel", "Kestrel",
         "Lune", "Mirrow", "Nessa", "Orrin", "Pell")
STEM = ("Marlow", "Northwind", "Copperleaf", "Bluehaven", "Ironbark", "Silverline", "Harrowgate", "Lanternfield",
        "Quayside", "Redfern", "Stonebridge", "Tallowmere", "Wrenfield", "Ambergate", "Brackwater", "Cindervale")
KIND = ("Instruments", "Tidal Power", "Logistics", "Textiles", "Robotics", "Pharmaceuticals", "Shipyards", "Optics",
        "Software", "Breweries")
BAND = ("The Velvet Lanterns", "Paper Comets", "The Hollow Reeds", "Glass Orchard", "The Salt Choir", "Neon Harbour",
        "The Quiet Engines", "Copper Moths", "The Lantern Kings", "Winter Signal", "The Drift Collective", "Iron Gulls")
FIELD = ("marine biology", "medieval history", "applied mathematics", "architecture", "economics", "linguistics",
         "mechanical engineering", "astronomy")
JOB = ("engineer", "novelist", "architect", "economist", "composer", "chemist", "diplomat", "painter")
GENRE = ("folk rock", "synth-pop", "post-punk", "jazz fusion", "baroque pop", "indie folk")


def _rng(seed: int, *parts: Any) -> np.random.Generator:
    digest = hashlib.sha256(":".join(map(str, (seed, *parts))).encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


def _pick(rng: np.random.Generator, xs):
    return xs[int(rng.integers(len(xs)))]


class _World:
    """Fictional entities with consistent facts, each described by a paragraph of sentences."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def _unique(self, make) -> str:
        for _ in range(200):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise RuntimeError("ran out of unique sample names")

    def person(self) -> dict:
        r = self.rng
        name = self._unique(lambda: f"{_pick(r, FIRST)} {_pick(r, LAST)}")
        return {"name": name, "born": int(r.integers(1920, 1990)), "city": _pick(r, CITY), "job": _pick(r, JOB),
                "field": _pick(r, FIELD), "uni": f"University of {_pick(r, CITY)}"}

    def person_paragraph(self, p: dict) -> list[str]:
        r = self.rng
        return [f"{p['name']} (born {p['born']}) is {with_article(p['job'])} who grew up in {p['city']}.",
                f"{p['name'].split()[0]} was born in {p['city']} in {p['born']}.",
                f"{p['name']} studied {p['field']} at the {p['uni']} before moving abroad.",
                f"Critics have praised {p['name'].split()[1]}'s early work for its patience and precision.",
                f"In later years {p['name'].split()[1]} taught evening classes and wrote {int(r.integers(2, 9))} books."]

    def company(self, founder: dict) -> dict:
        r = self.rng
        name = self._unique(lambda: f"{_pick(r, STEM)} {_pick(r, KIND)}")
        return {"name": name, "year": int(r.integers(1950, 2015)), "founder": founder["name"],
                "city": _pick(r, CITY), "staff": int(r.integers(40, 9000))}

    def company_paragraph(self, c: dict) -> list[str]:
        return [f"{c['name']} is a privately held firm headquartered in {c['city']}.",
                f"{c['name']} was founded in {c['year']} by {c['founder']}.",
                f"The company employs about {c['staff']} people across three sites.",
                "Its first products were sold mainly to regional customers before exports grew.",
                f"A new research centre opened near {c['city']} harbour a few years ago."]

    def city(self, name: str) -> dict:
        r = self.rng
        return {"name": name, "river": _pick(r, RIVER), "pop": int(r.integers(8, 900)) * 1000,
                "landmark": f"the {_pick(r, ('Old', 'North', 'Grand', 'Stone'))} {_pick(r, ('Bridge', 'Market', 'Tower', 'Gate'))}"}

    def city_paragraph(self, c: dict) -> list[str]:
        return [f"{c['name']} is a market town with about {c['pop']:,} inhabitants.",
                f"The River {c['river']} flows through {c['name']} on its way to the sea.",
                f"Visitors to {c['name']} usually start at {c['landmark']}, built in the fourteenth century.",
                "The town hosts a spring fair that draws traders from the surrounding valleys."]

    def university_paragraph(self, uni: str, city: str) -> list[str]:
        r = self.rng
        return [f"The {uni} is a public research university located in {city}.",
                f"It was chartered in {int(r.integers(1820, 1960))} and admits about {int(r.integers(2, 30))},000 students.",
                f"Its best-known faculty is the school of {_pick(r, FIELD)}.",
                "The library holds a large collection of maps and early printed books."]

    def band(self, singer: dict) -> dict:
        r = self.rng
        return {"name": self._unique(lambda: _pick(r, BAND)), "singer": singer["name"],
                "year": int(r.integers(1965, 2012)), "genre": _pick(r, GENRE), "city": _pick(r, CITY)}

    def band_paragraph(self, b: dict) -> list[str]:
        r = self.rng
        return [f"{b['name']} are {with_article(b['genre'])} group formed in {b['year']}.",
                f"The band's lead singer is {b['singer']}.",
                f"They recorded their debut album in a converted chapel in {b['city']}.",
                f"Over the following decade they released {int(r.integers(3, 11))} studio albums."]

    def distractor(self) -> tuple[str, list[str]]:
        kind = int(self.rng.integers(4))
        if kind == 0:
            p = self.person()
            return p["name"], self.person_paragraph(p)
        if kind == 1:
            c = self.company(self.person())
            return c["name"], self.company_paragraph(c)
        if kind == 2:
            c = self.city(self._unique(lambda: f"{_pick(self.rng, CITY)} {_pick(self.rng, ('Heights', 'Quay', 'Green', 'Fields'))}"))
            return c["name"], self.city_paragraph(c)
        b = self.band(self.person())
        return b["name"], self.band_paragraph(b)


def _hotpot(rid: str, question: str, answer: str, gold: list[tuple[str, list[str], list[int]]],
            world: _World, n_distractors: int) -> dict:
    paragraphs = [(t, s) for t, s, _ in gold] + [world.distractor() for _ in range(n_distractors)]
    order = world.rng.permutation(len(paragraphs))
    context = [[paragraphs[i][0], paragraphs[i][1]] for i in order]
    facts = [[t, k] for t, _, ks in gold for k in ks]
    return {"_id": rid, "question": question, "answer": answer, "type": "bridge", "level": "sample",
            "supporting_facts": facts, "context": context}


def hotpot_records(seed: int, n: int, n_distractors: int = 8) -> list[dict]:
    """`n` records in HotpotQA's original JSON layout; every 7th one is deliberately weak.

    No two records ask the same question: a record whose question was already asked is drawn again
    from the next sub-seed (two records asking one question with different answers would each be a
    second right answer in the other's pools).
    """
    out, asked = [], set()
    for i in range(n):
        for attempt in range(100):
            rec = _hotpot_record(seed, i, attempt, n_distractors)
            key = " ".join(rec["question"].lower().split())
            if key not in asked:
                break
        else:
            raise RuntimeError(f"sample record {i}: no unused question after 100 draws")
        asked.add(key)
        out.append(rec)
    return out


def _hotpot_record(seed: int, i: int, attempt: int, n_distractors: int) -> dict:
    w = _World(_rng(seed, "hotpot", i) if attempt == 0 else _rng(seed, "hotpot", i, attempt))
    rid = f"sample-hp-{i:03d}"
    kind = i % 7
    if kind in (0, 4):       # bridge: company -> founder's birth year
        p = w.person()
        c = w.company(p)
        q = f"In which year was the founder of {c['name']} born?"
        gold = [(c["name"], w.company_paragraph(c), [1]), (p["name"], w.person_paragraph(p), [0, 1])]
        return _hotpot(rid, q, str(p["born"]), gold, w, n_distractors)
    if kind in (1, 5):       # bridge: institute -> the city it is in -> river
        inst = w._unique(lambda: f"{_pick(w.rng, LAST)} Institute")
        city = w.city(_pick(w.rng, CITY))
        q = f"Which river flows through the city where the {inst} is located?"
        gold = [(inst, w.university_paragraph(inst, city["name"]), [0]),
                (city["name"], w.city_paragraph(city), [1])]
        return _hotpot(rid, q, city["river"], gold, w, n_distractors)
    if kind == 2:            # comparison
        a, b = w.company(w.person()), w.company(w.person())
        q = f"Which was founded earlier, {a['name']} or {b['name']}?"
        gold = [(a["name"], w.company_paragraph(a), [1]), (b["name"], w.company_paragraph(b), [1])]
        return _hotpot(rid, q, a["name"] if a["year"] <= b["year"] else b["name"], gold, w, n_distractors)
    if kind == 3:            # 3 hops: band -> singer -> birthplace -> river
        p = w.person()
        band = w.band(p)
        city = w.city(p["city"])
        q = f"Which river runs through the birthplace of the lead singer of {band['name']}?"
        gold = [(band["name"], w.band_paragraph(band), [1]), (p["name"], w.person_paragraph(p), [1]),
                (city["name"], w.city_paragraph(city), [1])]
        return _hotpot(rid, q, city["river"], gold, w, n_distractors)
    c = w.company(w.person())   # weak: one evidence sentence (the filter drops it)
    q = f"In which year was {c['name']} founded?"
    return _hotpot(rid, q, str(c["year"]), [(c["name"], w.company_paragraph(c), [1])], w, n_distractors)


# ---- MMDocRAG-style annual reports ---------------------------------------------------------

def _font(size: int):
    return ImageFont.load_default(size=size)


def bar_chart(title: str, labels: list[str], values: list[int], seed: int, size=(384, 256)) -> PILImage.Image:
    rng = _rng(seed, "chart")
    img = PILImage.new("RGB", size, (250, 250, 247))
    d = ImageDraw.Draw(img)
    d.text((10, 6), title, fill=(20, 20, 20), font=_font(13))
    top, bottom, left = 34, size[1] - 28, 16
    width = (size[0] - 2 * left) // len(values)
    colour = tuple(int(c) for c in rng.integers(40, 200, 3))
    vmax = max(values) or 1
    for k, (lab, v) in enumerate(zip(labels, values)):
        h = int((bottom - top) * v / vmax)
        x0 = left + k * width + 6
        d.rectangle((x0, bottom - h, x0 + width - 12, bottom), fill=colour)
        d.text((x0, bottom - h - 14), str(v), fill=(10, 10, 10), font=_font(11))
        d.text((x0, bottom + 6), lab, fill=(10, 10, 10), font=_font(11))
    return img


def table_image(title: str, rows: list[tuple[str, str]], size=(384, 224)) -> PILImage.Image:
    img = PILImage.new("RGB", size, (255, 255, 255))
    d = ImageDraw.Draw(img)
    d.text((10, 6), title, fill=(20, 20, 20), font=_font(13))
    y = 32
    for a, b in rows:
        d.rectangle((10, y, size[0] - 10, y + 24), outline=(120, 120, 120))
        d.text((16, y + 5), a, fill=(0, 0, 0), font=_font(12))
        d.text((size[0] // 2 + 6, y + 5), b, fill=(0, 0, 0), font=_font(12))
        y += 24
    return img


def mmdocrag_records(seed: int, n: int) -> tuple[list[dict], dict[str, PILImage.Image]]:
    """`n` records in MMDocRAG's JSONL layout, plus the images their `img_path`s name."""
    records, images = [], {}
    taken: set[str] = set()   # names of every record so far: no two reports are about one company or person
    for i in range(n):
        w = _World(_rng(seed, "mmdocrag", i))
        w.used = taken
        r = w.rng
        ceo = w.person()
        c = w.company(w.person())
        years = list(range(2016, 2022))
        revenue = [int(x) for x in r.integers(40, 900, len(years))]
        ask = int(r.integers(len(years)))
        rid = f"sample-md-{i:03d}"
        # the title line names no company (every report's is the same), so one line never gives the record away; the
        # company is named where a real report names it, in the body and on its charts
        texts = [f"Annual report {years[-1]}: letter to shareholders.",
                 f"Our chief executive officer, {ceo['name']}, joined the board after a long career as {with_article(ceo['job'])}.",
                 f"Headquartered in {c['city']}, {c['name']} employs about {c['staff']} people.",
                 "The audit committee met six times during the year and reviewed all material contracts.",
                 f"Capital spending focused on a new plant outside {_pick(r, CITY)} and on staff training.",
                 "Risk factors include currency movements, supply interruptions and changes in regulation.",
                 "The sustainability programme cut water use per unit of output for the third year running.",
                 f"Dividends of {int(r.integers(5, 60))} cents per share were paid in two instalments.",
                 "Segment reporting follows the internal structure used by the management team.",
                 "The outlook section describes expected demand in the coming financial year."]
        # the evidence (the CEO sentence, the revenue chart) sits anywhere in the report, as in HotpotQA, not
        # always on its first page: a seeded place for each
        ceo_at = int(r.integers(1, len(texts)))
        texts.insert(ceo_at, texts.pop(1))
        text_quotes = [{"quote_id": f"text{k + 1}", "type": "text", "text": t, "page_id": k // 3 + 1,
                        "layout_id": (k % 3) * 2 + 1} for k, t in enumerate(texts)]
        img_specs = [("revenue", f"{c['name']} revenue by year (million dollars)"),
                     ("staff", f"{c['name']} staff by site"),
                     ("board", f"{c['name']} board committees"),
                     ("market", f"{c['name']} market share by region (percent)")]
        chart_at = int(r.integers(len(img_specs)))
        img_specs.insert(chart_at, img_specs.pop(0))
        img_quotes = []
        for k, (key, desc) in enumerate(img_specs):
            path = f"{rid}/{key}.png"
            if key == "revenue":
                images[path] = bar_chart(desc, [str(y)[2:] for y in years], revenue, seed * 7919 + i)
            elif key == "board":
                images[path] = table_image(desc, [("Audit", "A. Rowe"), ("Risk", "P. Imre"),
                                                  ("Pay", "L. Okafor"), ("Nomination", "S. Brandt")])
            else:
                vals = [int(v) for v in r.integers(5, 60, 4)]
                images[path] = bar_chart(desc, ["N", "S", "E", "W"], vals, seed * 7919 + i + k)
            img_quotes.append({"quote_id": f"image{k + 1}", "type": "image", "img_path": path,
                               "img_description": f"Chart: {desc}.", "page_id": k + 1, "layout_id": 2 * k + 2})
        if i % 6 == 5:   # weak: vague question whose words link to no evidence
            q, gold = "What does this say?", ["text5", "text6"]
        else:
            q = (f"How much revenue did {c['name']} report in {years[ask]} according to its revenue chart, "
                 f"and who is its chief executive officer?")
            ceo_quote, chart = f"text{ceo_at + 1}", f"image{chart_at + 1}"
            seat = f"text{next(k for k, t in enumerate(texts) if t.startswith('Headquartered in')) + 1}"
            gold = [chart, ceo_quote] if i % 2 == 0 else [seat, chart, ceo_quote]
        records.append({"q_id": rid, "doc_name": f"{c['name']} annual report", "domain": "sample",
                        "question": q, "question_type": "multi-hop", "text_quotes": text_quotes,
                        "img_quotes": img_quotes, "gold_quotes": gold,
                        "answer_short": f"{revenue[ask]} million dollars; {ceo['name']}"})
    return records, images


def encyclopedia_text(seed: int, n_paragraphs: int = 600) -> str:
    """Fictional encyclopedic prose (people, firms, towns, bands): unrelated filler for reports."""
    paras = []
    for k in range(n_paragraphs):
        title, sents = _World(_rng(seed, "encyclopedia", k)).distractor()
        paras.append(f"{title}. " + " ".join(sents))
    return "\n\n".join(paras)

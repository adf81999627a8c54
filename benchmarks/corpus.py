"""Deterministic benchmark corpus: mixed Apertus conversations for every dialect.

``corpus(dialect, n=2000, seed=0)`` returns ``n`` conversation items, each a dict with
``messages``, ``tools``, ``enable_thinking`` and ``add_generation_prompt`` (the keyword
arguments of ``apertus_fast.render`` / the template variables). The mix covers:

* string assistants, block assistants (``thoughts``, ``tool_calls``, ``tool_outputs``,
  ``response``, the ``display_answers`` hand-off), ``tool_calls`` on messages followed by
  ``tool`` messages, pending tool calls at the end of a conversation;
* 0 or 1-5 tools with realistic JSON-schema parameters (nested objects, arrays of scalars,
  objects and arrays, enums, defaults of every JSON type, ``oneOf`` with and without
  object variants, descriptions and defaults on variants, type lists, ``nullable``);
* 1-8 turns, system prompts as strings or ``{"text": ...}``, user content as strings or
  ``{"parts": [...]}`` (and, for ``apertus-1.5`` only, plain part lists with image and
  audio parts, OpenAI-shaped tools and tool calls with object arguments);
* English, German, French and Italian prose, emoji, CJK, code, from one-line chat to
  long documents (tens of KB); with ``mix="world"``, prose in Cyrillic, CJK, Arabic,
  Devanagari and Greek instead (the command-line benchmark's second file).

Generation is seeded (``random.Random``), so the corpus is the same on every machine.
Items are returned as ``json.loads`` of their JSON lines, decoded in one pass, as a
pipeline holds a JSONL file it has read (see ``_build``).
Every generated conversation is rendered with the official template in its real jinja2
environment (``tests/oracle.py``) while the corpus is built; one that the template
rejects is a generator bug and raises (nothing is dropped). ``rendered(dialect)`` returns
those renders (cached).

Run ``python benchmarks/corpus.py`` for a summary of the corpus of each dialect.
"""

from __future__ import annotations

import json
import random
import sys
from functools import lru_cache
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from tests.oracle import DIALECT_FILES, ORACLE_MISSING, OracleError, oracle_render  # noqa: E402

__all__ = ["DIALECTS", "DATE", "N", "corpus", "rendered", "render_kwargs", "summary"]

#: The dialects benchmarked (every official template).
DIALECTS = tuple(DIALECT_FILES)
#: The fixed date of the default system prompt (``strftime_now``), for reproducible text.
DATE = "2026-01-01"
#: Default corpus size.
N = 2000

# --------------------------------------------------------------------------- text pools
# Hand-written sentences; none contains a special token or "<|".

_EN = [
    "Could you summarise the main points of the report in a few sentences?",
    "The quarterly figures show a modest increase in revenue, mostly driven by exports.",
    "I am planning a hiking trip in the Bernese Oberland next month.",
    "Please explain the difference between a process and a thread.",
    "The committee postponed the decision until more data is available.",
    "Make sure the function handles empty input without raising an exception.",
    "Large language models are trained on a mixture of web text, code and books.",
    "Our team meets every Tuesday morning to review the open tickets.",
    "The recipe needs two eggs, 250 grams of flour and a pinch of salt.",
    "What are the trade-offs between consistency and availability in distributed systems?",
    "Remember to back up the database before running the migration.",
    "The train from Geneva to Zurich takes about two hours and forty minutes.",
    "She wrote a detailed proposal describing the new data pipeline.",
    "Thanks, that was really helpful!",
    "Can you rewrite this paragraph in a more formal tone?",
    "The results were statistically significant at the 5% level (p = 0.031).",
    "Use a context manager so the file is always closed, even on errors.",
    "Mountains cover roughly sixty percent of the country's surface.",
]
_DE = [
    "Können Sie mir bitte die wichtigsten Punkte des Berichts zusammenfassen?",
    "Der Zug nach Bern fährt um 14:32 Uhr von Gleis 7 ab.",
    "Die Universität Zürich und die ETH arbeiten eng zusammen.",
    "Übermorgen wird es in Graubünden voraussichtlich schneien.",
    "Bitte überprüfe die Größe der Datei, bevor du sie hochlädst.",
    "Das Gespräch über die Budgetplanung wurde auf nächste Woche verschoben.",
    "Wir benötigen eine Übersetzung ins Französische und ins Italienische.",
    "Grüezi mitenand, wie kann ich Ihnen heute helfen?",
    "Die Straße ist wegen Bauarbeiten bis Ende März gesperrt.",
    "Ein großer Teil der Schweizer Bevölkerung spricht mehr als eine Landessprache.",
]
_FR = [
    "Pourriez-vous m'expliquer comment fonctionne ce modèle de langage ?",
    "La réunion aura lieu à Lausanne, près de la gare, à neuf heures.",
    "Il faut vérifier les données avant de publier les résultats.",
    "Le lac Léman est le plus grand lac d'Europe occidentale.",
    "Merci beaucoup pour votre réponse détaillée et très claire !",
    "Les élèves ont présenté leurs projets devant un jury de spécialistes.",
    "Ça dépend du contexte : en général, la deuxième méthode est plus rapide.",
    "Nous avons reçu votre demande et nous la traiterons dès que possible.",
    "Où se trouve la bibliothèque la plus proche d'ici ?",
]
_IT = [
    "Potresti aiutarmi a scrivere una lettera di presentazione?",
    "Il treno per Lugano è in ritardo di circa venti minuti.",
    "La città è famosa per la sua architettura e per il suo caffè.",
    "Perché il cielo è blu durante il giorno e rosso al tramonto?",
    "Abbiamo già inviato la documentazione al cliente ieri sera.",
    "Più tardi andrò al mercato a comprare frutta e verdura.",
    "Qual è la differenza tra un algoritmo greedy e uno dinamico?",
    "Ti ringrazio per la pazienza e per la collaborazione.",
]
_CJK = [
    "请帮我总结一下这篇文章的主要内容。",
    "今日はとても良い天気ですね。散歩に行きましょう。",
    "이 문서를 영어로 번역해 주실 수 있나요?",
    "机器学习模型需要大量的训练数据。",
    "東京から大阪までは新幹線で約二時間半かかります。",
    "我们明天下午三点在会议室开会。",
]
_EMOJI = ["🙂", "🚆", "🏔️", "🧀", "🍫", "✅", "🎉", "🤖", "📈", "👍🏽", "🇨🇭", "❤️", "🔥", "😅", "🌍"]
_CODE = [
    "```python\ndef mean(xs):\n    if not xs:\n        raise ValueError(\"empty\")\n    return sum(xs) / len(xs)\n```",
    "```sql\nSELECT city, COUNT(*) AS n\nFROM bookings\nWHERE created_at >= '2025-01-01'\nGROUP BY city\nORDER BY n DESC;\n```",
    "```javascript\nconst total = items.filter(x => x.price > 0 && x.qty >= 1)\n  .reduce((a, x) => a + x.price * x.qty, 0);\n```",
    "```bash\nfor f in *.json; do jq '.items | length' \"$f\"; done\n```",
    "```rust\nfn fib(n: u64) -> u64 {\n    if n < 2 { n } else { fib(n - 1) + fib(n - 2) }\n}\n```",
]
_TABLE = (
    "| Kanton | Hauptort | Sprache |\n|---|---|---|\n| Zürich | Zürich | Deutsch |\n"
    "| Vaud | Lausanne | Français |\n| Ticino | Bellinzona | Italiano |\n| Graubünden | Chur | Deutsch, Rumantsch, Italiano |"
)
_LANGS = [(_EN, 55), (_DE, 15), (_FR, 12), (_IT, 10), (_CJK, 8)]

# The "world" mix (``corpus(..., mix="world")``, the command-line benchmark's second
# file): prose in scripts whose every letter is 2 or 3 bytes of UTF-8 (Cyrillic, Greek,
# Arabic: 2; Devanagari, CJK: 3), as most of the languages Apertus was trained on are
# written.
_RU = [
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Поезд из Цюриха в Женеву отправляется каждые полчаса.",
    "Пожалуйста, проверьте данные перед публикацией результатов.",
    "Почему небо днём голубое, а на закате красное?",
    "Мы получили ваш запрос и ответим в ближайшее время.",
    "Какая разница между жадным алгоритмом и динамическим программированием?",
]
_EL = [
    "Το τρένο για τη Λωζάνη έχει καθυστέρηση περίπου είκοσι λεπτά.",
    "Μπορείτε να μου εξηγήσετε πώς λειτουργεί αυτός ο αλγόριθμος;",
    "Ευχαριστώ πολύ για τη λεπτομερή και σαφή απάντησή σας.",
    "Η λίμνη της Γενεύης είναι η μεγαλύτερη λίμνη της δυτικής Ευρώπης.",
]
_AR = [
    "هل يمكنك مساعدتي في كتابة رسالة تعريفية؟",
    "يغادر القطار من زيورخ إلى جنيف كل نصف ساعة.",
    "يجب التحقق من البيانات قبل نشر النتائج.",
    "شكراً جزيلاً على إجابتك المفصلة والواضحة.",
    "ما الفرق بين الخوارزمية الجشعة والبرمجة الديناميكية؟",
]
_HI = [
    "मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती।",
    "ज्यूरिख से जिनेवा के लिए ट्रेन हर आधे घंटे में चलती है।",
    "कृपया परिणाम प्रकाशित करने से पहले डेटा की जाँच करें।",
    "आपके विस्तृत और स्पष्ट उत्तर के लिए बहुत धन्यवाद।",
    "मशीन लर्निंग मॉडल को बहुत सारे प्रशिक्षण डेटा की आवश्यकता होती है।",
]
#: Language mixes: for each, the prose pools a conversation draws from (weighted), or,
#: for "world", the languages a conversation is in: one each (weighted), its sentences
#: 85 % in it and 15 % in English.
_MIXES = {
    "swiss": _LANGS,
    "world": [(_RU, 25), (_CJK, 25), (_AR, 20), (_HI, 20), (_EL, 10)],
}


class _Random(random.Random):
    """The generator's source of randomness, carrying the language mix it draws prose from."""

    def __init__(self, seed, langs):
        super().__init__(seed)
        self.langs = langs

_SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are Apertus, a helpful assistant created by the SwissAI initiative. Answer concisely.",
    "Du bist ein freundlicher Assistent. Antworte immer auf Deutsch.",
    "Tu es un assistant serviable. Réponds en français, de manière précise.",
    "Sei un assistente utile. Rispondi in italiano.",
    "You are a senior software engineer reviewing pull requests. Be direct and point out bugs.",
    "You are a travel agent for Swiss railways. Use the tools to look up connections.",
    "",
]

# --------------------------------------------------------------------------- tools

_CITY = ["Zürich", "Genève", "Lugano", "Bern", "Basel", "Lausanne", "Chur", "St. Gallen", "Tokyo", "Paris"]


def _tool_catalogue():
    """Hand-written, realistic tool specs (flat shape): name -> (spec, argument maker)."""
    cat = {}

    def add(spec, make_args):
        cat[spec["name"]] = (spec, make_args)

    add({
        "name": "get_weather",
        "description": "Get the current weather and a short forecast for a location.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City name, e.g. 'Zürich' or 'Genève'"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius",
                         "description": "Temperature unit"},
                "days": {"type": "integer", "description": "Number of forecast days", "default": 3},
                "include_hourly": {"type": "boolean", "default": False},
            },
            "required": ["location"],
        },
    }, lambda r: {"location": r.choice(_CITY), "unit": r.choice(["celsius", "fahrenheit"]), "days": r.randint(1, 7)})
    add({
        "name": "search_connections",
        "description": "Search train connections in the Swiss public transport network.",
        "parameters": {
            "type": "object",
            "properties": {
                "from": {"type": "string", "description": "Departure station"},
                "to": {"type": "string", "description": "Arrival station"},
                "via": {"type": "array", "items": {"type": "string"}, "description": "Optional stops"},
                "datetime": {"type": "string", "description": "ISO 8601 date and time", "nullable": True},
                "is_arrival_time": {"type": "boolean", "default": False},
                "transport": {"type": "array", "items": {"type": "string", "enum": ["train", "bus", "tram", "ship"]}},
                "passenger": {
                    "type": "object",
                    "description": "Traveller details",
                    "properties": {
                        "age": {"type": "integer"},
                        "half_fare": {"type": "boolean"},
                        "class": {"type": "string", "enum": ["1", "2"]},
                    },
                    "required": ["age"],
                },
                "limit": {"type": "integer", "default": 4},
            },
            "required": ["from", "to"],
        },
    }, lambda r: {"from": r.choice(_CITY[:8]), "to": r.choice(_CITY[:8]), "datetime": "2026-01-0%dT%02d:%02d" % (r.randint(1, 9), r.randint(5, 22), r.choice([0, 15, 30, 45]))})
    add({
        "name": "convert_currency",
        "description": "Convert an amount between currencies using today's rate.",
        "parameters": {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "description": "Amount to convert"},
                "from_currency": {"type": "string", "enum": ["CHF", "EUR", "USD", "GBP", "JPY"]},
                "to_currency": {"type": "string", "enum": ["CHF", "EUR", "USD", "GBP", "JPY"], "default": "CHF"},
                "round_to": {"type": ["integer", "null"], "description": "Decimal places"},
            },
            "required": ["amount", "from_currency"],
        },
    }, lambda r: {"amount": round(r.uniform(1, 5000), 2), "from_currency": r.choice(["EUR", "USD", "GBP"]), "to_currency": "CHF"})
    add({
        "name": "create_calendar_event",
        "description": "Create an event in the user's calendar.",
        "parameters": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "Event title"},
                "start": {"type": "string", "description": "Start time (ISO 8601)"},
                "duration_minutes": {"type": "integer", "default": 30},
                "attendees": {
                    "type": "array",
                    "description": "People to invite",
                    "items": {
                        "type": "object",
                        "properties": {"email": {"type": "string"}, "optional": {"type": "boolean"}},
                        "required": ["email"],
                    },
                },
                "reminder": {
                    "description": "Reminder before the event",
                    "oneOf": [
                        {"type": "integer", "description": "minutes before"},
                        {"type": "string", "enum": ["none", "default"]},
                    ],
                    "default": "default",
                },
                "location": {"type": "object", "properties": {"room": {"type": "string"}, "building": {"type": "string"}}},
                "recurrence": {"type": "string", "enum": ["none", "daily", "weekly", "monthly"], "default": "none"},
            },
            "required": ["title", "start"],
        },
    }, lambda r: {"title": r.choice(["Team sync", "Réunion budget", "Sprint review", "Mittagessen"]), "start": "2026-01-1%dT10:00" % r.randint(0, 9), "attendees": [{"email": "anna@example.ch"}]})
    add({
        "name": "query_database",
        "description": "Run a read-only SQL query against the analytics warehouse & return rows.",
        "parameters": {
            "type": "object",
            "properties": {
                "sql": {"type": "string", "description": "A SELECT statement"},
                "params": {"type": "array", "items": {"type": ["string", "number", "null"]}},
                "max_rows": {"type": "integer", "default": 100},
                "format": {"type": "string", "enum": ["json", "csv", "markdown"], "default": "json"},
                "timeout": {"type": "number", "default": 30.0, "description": "Seconds"},
                "options": {"type": "object", "default": {"explain": False, "cache": True, "<note>": "a&b"}},
            },
            "required": ["sql"],
        },
    }, lambda r: {"sql": "SELECT city, COUNT(*) FROM trips WHERE year = %d GROUP BY city" % r.randint(2019, 2025), "max_rows": r.choice([10, 50, 100])})
    add({
        "name": "send_email",
        "description": "Send an e-mail on behalf of the user.",
        "parameters": {
            "type": "object",
            "properties": {
                "to": {"type": "array", "items": {"type": "string"}, "description": "Recipients"},
                "cc": {"type": "array", "items": {"type": "string"}, "default": []},
                "subject": {"type": "string"},
                "body": {"type": "string", "description": "Plain text or Markdown body"},
                "priority": {"type": "string", "enum": ["low", "normal", "high"], "default": "normal"},
                "signature": {"type": "string", "default": "Freundliche Grüsse – Team Zürich"},
            },
            "required": ["to", "subject", "body"],
        },
    }, lambda r: {"to": ["marco@example.ch"], "subject": r.choice(["Rapport trimestriel", "Termin", "Follow-up"]), "body": r.choice(_DE + _FR)})
    add({
        "name": "translate_text",
        "description": "Translate text between German, French, Italian, Romansh and English.",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "source_language": {"type": "string", "enum": ["auto", "de", "fr", "it", "rm", "en"], "default": "auto"},
                "target_language": {"type": "string", "enum": ["de", "fr", "it", "rm", "en"]},
                "formality": {"oneOf": [{"type": "string", "enum": ["formal", "informal"]}, {"type": "null"}]},
                "glossary": {"type": "object", "description": "Term -> preferred translation"},
            },
            "required": ["text", "target_language"],
        },
    }, lambda r: {"text": r.choice(_EN), "target_language": r.choice(["de", "fr", "it"])})
    add({
        "name": "run_python",
        "description": "Execute Python code in a sandbox and return stdout.",
        "parameters": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "Python source"},
                "timeout_s": {"type": "integer", "default": 10},
                "packages": {"type": "array", "items": {"type": "string"}, "nullable": True},
            },
            "required": ["code"],
        },
    }, lambda r: {"code": "import math\nprint(math.sqrt(%d))" % r.randint(2, 999)})
    add({
        "name": "get_stock_price",
        "description": "Look up the latest price of a listed security.",
        "parameters": {
            "type": "object",
            "properties": {
                "symbol": {"type": "string", "description": "Ticker symbol, e.g. NESN or ROG"},
                "exchange": {"type": "string", "enum": ["SIX", "XETRA", "NYSE", "NASDAQ"], "default": "SIX"},
                "history": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            },
            "required": ["symbol"],
        },
    }, lambda r: {"symbol": r.choice(["NESN", "ROG", "NOVN", "UBSG", "ABBN"])})
    add({
        "name": "search_documents",
        "description": "Full-text search in the user's documents; returns the best passages.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {
                    "type": "object",
                    "properties": {
                        "author": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "date_range": {
                            "type": "object",
                            "properties": {"from": {"type": "string"}, "to": {"type": "string"}},
                            "required": ["from"],
                        },
                        "kind": {"type": "string", "enum": ["pdf", "docx", "note"]},
                    },
                },
                "top_k": {"type": "integer", "default": 5},
                "rerank": {"type": "boolean", "default": True},
                "mode": {
                    "oneOf": [
                        {"type": "string", "enum": ["semantic", "keyword"], "description": "a named mode"},
                        {"type": "number", "description": "hybrid weight", "default": 0.5},
                    ],
                },
            },
            "required": ["query"],
        },
    }, lambda r: {"query": r.choice(["Jahresbericht 2024", "contrat de bail", "verbale riunione", "GPU budget"]), "top_k": r.randint(1, 10)})
    add({
        "name": "set_thermostat",
        "description": "Set the target temperature of a room.",
        "parameters": {
            "type": "object",
            "properties": {
                "room": {"type": "string", "enum": ["living", "kitchen", "bedroom", "office"]},
                "target": {"oneOf": [{"type": "number"}, {"type": "object", "properties": {"min": {"type": "number"}, "max": {"type": "number"}}}]},
                "schedule": {"type": "array", "items": {"oneOf": [{"type": "object"}, {"type": "object"}]}},
            },
            "required": ["room", "target"],
        },
    }, lambda r: {"room": r.choice(["living", "office"]), "target": r.choice([20, 21.5, 22])})
    add({
        "name": "get_current_time",
        "description": "Return the current date and time.",
        "parameters": {"type": "object", "properties": {}},
    }, lambda r: {"tz": "Europe/Zurich"})
    add({
        "name": "display_answers",
        "description": "Show the final answers to the user as a list of options.",
        "parameters": {
            "type": "object",
            "properties": {"answers": {"type": "array", "items": {"type": "string"}, "description": "Answers to show"}},
            "required": ["answers"],
        },
    }, lambda r: {"answers": [r.choice(_EN)[:40], r.choice(_DE)[:40]]})
    return cat


_CATALOGUE = _tool_catalogue()
_CATALOGUE_NAMES = sorted(_CATALOGUE)

# Random schema generator (on top of the catalogue) for extra variety.
_PROP_NAMES = ["query", "limit", "offset", "name", "value", "items", "mode", "lang", "region", "tags",
               "threshold", "config", "path", "enabled", "callback_url", "labels", "größe", "priorité"]
_DESCS = ["The value to use", "Maximum number of results", "Langue de la réponse", "Optionaler Filter",
          "Soglia minima (0-1)", "Identifier of the resource", "ISO 3166 country code", "Ein Pfad wie /data/x.csv"]


def _random_schema(r: random.Random, depth: int) -> dict:
    kinds = ["string", "integer", "number", "boolean", "enum", "array", "object", "oneOf", "typelist", "any"]
    weights = [22, 10, 8, 8, 10, 14, 8 if depth < 2 else 0, 8, 4, 2]
    k = r.choices(kinds, weights)[0]
    if k == "string":
        s = {"type": "string"}
        if r.random() < 0.2:
            s["nullable"] = True
        if r.random() < 0.2:
            s["default"] = r.choice(["", "auto", "Zürich", "x<y>&'z'"])
    elif k in ("integer", "number"):
        s = {"type": k}
        if r.random() < 0.3:
            s["default"] = r.choice([0, 1, 10, 100]) if k == "integer" else r.choice([0.5, 1.0, 2.75])
    elif k == "boolean":
        s = {"type": "boolean"}
        if r.random() < 0.3:
            s["default"] = r.random() < 0.5
    elif k == "enum":
        vals = r.sample(["fast", "slow", "auto", "none", "de", "fr", "it", "en", "low", "high"], r.randint(2, 5))
        s = {"type": "string", "enum": vals}
        if r.random() < 0.4:
            s["default"] = vals[0]
    elif k == "array":
        s = {"type": "array"}
        if r.random() < 0.9:
            s["items"] = _random_schema(r, depth + 1)
        if r.random() < 0.15:
            s["nullable"] = True
        if r.random() < 0.2:
            s["default"] = r.choice([[], ["a", "b"], [1, 2, 3]])
    elif k == "object":
        props = {}
        for name in r.sample(_PROP_NAMES, r.randint(1, 4)):
            props[name] = _random_schema(r, depth + 1)
        s = {"type": "object", "properties": props}
        if r.random() < 0.6:
            s["required"] = r.sample(list(props), r.randint(0, len(props)))
        if r.random() < 0.2:
            s["default"] = {"b": 1, "a": [True, None]}
    elif k == "oneOf":
        variants = []
        for _ in range(r.randint(1, 3)):
            v = _random_schema(r, depth + 2) if r.random() < 0.3 else {"type": r.choice(["string", "integer", "number", "boolean", "null"])}
            v.pop("default", None)
            if r.random() < 0.3:
                v["description"] = r.choice(_DESCS)
            if r.random() < 0.2:
                v["default"] = r.choice([1, "on", None, 2.5])
            variants.append(v)
        s = {"oneOf": variants}
        if r.random() < 0.2:
            s["default"] = r.choice(["on", "off"])  # the template concatenates it: a string
    elif k == "typelist":
        s = {"type": r.sample(["string", "number", "null", "boolean", "object"], r.randint(1, 3))}
    else:
        s = {}
    if r.random() < 0.35 and "description" not in s:
        s["description"] = r.choice(_DESCS)
    return s


def _random_tool(r: random.Random, i: int) -> tuple[dict, object]:
    verb = r.choice(["fetch", "list", "update", "compute", "lookup", "export", "analyse"])
    noun = r.choice(["orders", "invoices", "sensors", "tickets", "routes", "documents", "metrics"])
    props = {}
    for name in r.sample(_PROP_NAMES, r.randint(0, 6)):
        props[name] = _random_schema(r, 0)
    params = {"type": "object", "properties": props}
    if props and r.random() < 0.7:
        params["required"] = r.sample(list(props), r.randint(1, len(props)))
    spec = {"name": f"{verb}_{noun}_{i}", "description": f"{verb.capitalize()} {noun} ({r.choice(_DESCS)}).",
            "parameters": params}
    if r.random() < 0.05:
        del spec["parameters"]

    def make_args(rr, props=tuple(props)):
        return {p: rr.choice([1, "x", True, "Zürich", [1, 2]]) for p in props[: rr.randint(0, len(props))]}

    return spec, make_args


# --------------------------------------------------------------------------- text makers

def _sentence(r: _Random) -> str:
    pool = r.choices([p for p, _ in r.langs], [w for _, w in r.langs])[0]
    return r.choice(pool)


def _paragraph(r: random.Random, k: int) -> str:
    return " ".join(_sentence(r) for _ in range(k))


def _text(r: random.Random, size: str) -> str:
    text = _plain_text(r, size)
    if size != "long" and r.random() < 0.05:  # an emoji in about one chat message in twenty
        text += " " + r.choice(_EMOJI)
    return text


def _plain_text(r: random.Random, size: str) -> str:
    if size == "short":
        return _sentence(r) if r.random() < 0.85 else r.choice(["Hi!", "Merci", "OK", "Danke.", "ciao", "?"])
    if size == "medium":
        parts = [_paragraph(r, r.randint(2, 5)) for _ in range(r.randint(1, 3))]
        if r.random() < 0.15:
            parts.insert(r.randint(0, len(parts)), r.choice(_CODE))
        if r.random() < 0.05:
            parts.append(_TABLE)
        return "\n\n".join(parts)
    # "long": a document of 2-40 KB
    target = r.choice([2_000, 5_000, 10_000, 20_000, 40_000])
    out, n = [], 0
    while n < target:
        chunk = _paragraph(r, r.randint(3, 8)) if r.random() < 0.85 else r.choice(_CODE + [_TABLE])
        if r.random() < 0.1:
            chunk = "## " + _sentence(r).rstrip(".?!") + "\n\n" + chunk
        out.append(chunk)
        n += len(chunk)
    return "\n\n".join(out)


def _size(r: random.Random) -> str:
    return r.choices(["short", "medium", "long"], [47, 50, 3])[0]


# --------------------------------------------------------------------------- conversations

class _Gen:
    def __init__(self, dialect: str, r: random.Random):
        self.d = dialect
        self.r = r
        self.v15 = dialect == "apertus-1.5"

    # -- tools
    def tools(self):
        r = self.r
        chosen = []
        for name in r.sample(_CATALOGUE_NAMES, r.randint(1, 5)):
            chosen.append(_CATALOGUE[name])
        if r.random() < 0.3:
            chosen[r.randrange(len(chosen))] = _random_tool(r, r.randint(1, 99))
        specs = []
        for spec, _ in chosen:
            spec = json.loads(json.dumps(spec))  # a private copy (items may be mutated below)
            if self.v15 and r.random() < 0.5:
                spec = {"type": "function", "function": spec}
            specs.append(spec)
        return specs, chosen

    def call(self, chosen, style):
        """A tool call: (name, arguments dict)."""
        r = self.r
        spec, make = r.choice(chosen)
        args = make(r)
        if not args:
            args = {"note": "no arguments"}
        return spec["name"], args

    def args_text(self, args):
        r = self.r
        return json.dumps(args, ensure_ascii=r.random() < 0.3)

    def message_tool_call(self, name, args):
        r = self.r
        if not self.v15:
            return {"type": "function", "function": {"name": name, "arguments": self.args_text(args)}}
        form = r.randrange(4)
        arguments = args if r.random() < 0.4 else self.args_text(args)
        if form == 0:
            return {"type": "function", "function": {"name": name, "arguments": arguments}}
        if form == 1:
            return {"function": {"name": name, "arguments": arguments}}
        if form == 2:
            return {"id": f"call_{r.randrange(10**6)}", "type": "function", "function": {"name": name, "arguments": arguments}}
        return {"name": name, "arguments": arguments}

    def block_call(self, name, args):
        r = self.r
        if self.v15 and r.random() < 0.4:
            arguments = args if r.random() < 0.5 else self.args_text(args)
            if r.random() < 0.5:
                return {"function": {"name": name, "arguments": arguments}}
            return {"name": name, "arguments": arguments}
        return {"name": name, "arguments": self.args_text(args)}

    def tool_output(self, name):
        r = self.r
        if r.random() < 0.08:
            return json.dumps({"error": "timeout", "retry_after": r.randint(1, 30)})
        if name == "get_weather":
            return json.dumps({"city": r.choice(_CITY), "temperature": round(r.uniform(-10, 30), 1),
                               "conditions": r.choice(["sonnig", "bewölkt", "pluie", "neve", "clear"])}, ensure_ascii=False)
        if name == "search_connections":
            return json.dumps({"connections": [{"departure": "%02d:%02d" % (r.randint(5, 22), r.randrange(60)),
                                                "duration": "%dh%02d" % (r.randint(0, 4), r.randrange(60)),
                                                "transfers": r.randint(0, 3), "platform": str(r.randint(1, 12))}
                                               for _ in range(r.randint(1, 4))]}, ensure_ascii=False)
        if name == "convert_currency":
            return json.dumps({"amount": round(r.uniform(1, 5000), 2), "currency": "CHF", "rate": round(r.uniform(0.8, 1.2), 4)})
        if name == "search_documents":
            return json.dumps([{"doc": f"doc-{r.randrange(1000)}", "score": round(r.random(), 3), "passage": _sentence(r)}
                               for _ in range(r.randint(1, 4))], ensure_ascii=False)
        k = r.randrange(4)
        if k == 0:
            return json.dumps({"status": "ok", "result": _sentence(r)}, ensure_ascii=False)
        if k == 1 or name == "query_database":
            return json.dumps({"rows": [[r.choice(_CITY), r.randint(1, 999)] for _ in range(r.randint(1, 6))]}, ensure_ascii=False)
        if k == 2:
            return json.dumps([{"id": i, "title": _sentence(r)[:30]} for i in range(r.randint(1, 4))], ensure_ascii=False)
        return r.choice(["OK", "done", "Gesendet.", "42", "null", _sentence(r)])

    # -- user
    def user(self, size):
        r = self.r
        text = _text(r, size)
        x = r.random()
        if self.v15 and x < 0.2:
            parts = []
            for _ in range(r.randint(1, 3)):
                kind = r.choice(["image", "image_url", "input_image", "audio", "audio_url", "input_audio"])
                if kind == "image_url":
                    parts.append({"type": "image_url", "image_url": {"url": f"https://example.org/img/{r.randrange(10**5)}.png"}})
                elif kind == "input_audio":
                    parts.append({"type": "input_audio", "input_audio": {"data": "UklGRiQAAABXQVZF", "format": "wav"}})
                else:
                    parts.append({"type": kind})
            parts.insert(r.randint(0, len(parts)), {"type": "text", "text": text})
            if r.random() < 0.5:
                return {"role": "user", "content": parts}
            return {"role": "user", "content": {"parts": parts}}
        if x < 0.3:
            cut = [text[: len(text) // 2], text[len(text) // 2:]] if r.random() < 0.5 else [text]
            return {"role": "user", "content": {"parts": [{"type": "text", "text": t} for t in cut]}}
        return {"role": "user", "content": text}

    # -- assistant turns (append messages; return whether tool outputs are pending)
    def string_turn(self, msgs, chosen, size, last):
        r = self.r
        if chosen and r.random() < 0.5:
            n_calls = r.randint(1, 3)
            calls = [self.call(chosen, "msg") for _ in range(n_calls)]
            pre = "" if r.random() < 0.5 else _sentence(r)
            msgs.append({"role": "assistant", "content": pre,
                         "tool_calls": [self.message_tool_call(n, a) for n, a in calls]})
            if last and r.random() < 0.15:
                return  # the call awaits its outputs
            for n, _ in calls:
                msgs.append({"role": "tool", "content": self.tool_output(n)})
            if r.random() < 0.85:
                msgs.append({"role": "assistant", "content": _text(r, size)})
            return
        msgs.append({"role": "assistant", "content": _text(r, size)})

    def blocks_turn(self, msgs, chosen, size, last, thinking):
        r = self.r
        blocks = []
        if thinking or r.random() < 0.2:
            blocks.append({"type": "thoughts", "text": _text(r, r.choice(["short", "medium"]))})
        if chosen and r.random() < 0.55:
            if "display_answers" in [c[0]["name"] for c in chosen] and r.random() < 0.3 and blocks:
                blocks.append({"type": "tool_calls", "calls": [self.block_call("display_answers", _CATALOGUE["display_answers"][1](r))]})
                blocks.append({"type": "tool_outputs", "outputs": [{"output": '{"shown": true}'}]})
                msgs.append({"role": "assistant", "content": {"blocks": blocks}})
                return
            for step in range(r.randint(1, 3)):
                calls = [self.call(chosen, "block") for _ in range(r.randint(1, 2))]
                blocks.append({"type": "tool_calls", "calls": [self.block_call(n, a) for n, a in calls]})
                if last and step == 0 and r.random() < 0.1:
                    msgs.append({"role": "assistant", "content": {"blocks": blocks}})
                    return  # pending tool call
                if r.random() < 0.25:
                    # outputs as tool messages, then the answer in a new assistant message
                    msgs.append({"role": "assistant", "content": {"blocks": blocks}})
                    for n, _ in calls:
                        msgs.append({"role": "tool", "content": self.tool_output(n)})
                    blocks = []
                    if r.random() < 0.3:
                        blocks.append({"type": "thoughts", "text": _sentence(r)})
                    break
                blocks.append({"type": "tool_outputs", "outputs": [{"output": self.tool_output(n)} for n, _ in calls]})
                if r.random() < 0.3:
                    blocks.append({"type": "thoughts", "text": _sentence(r)})
        blocks.append({"type": "response", "text": _text(r, size)})
        msgs.append({"role": "assistant", "content": {"blocks": blocks}})

    def conversation(self):
        r = self.r
        msgs = []
        has_tools = r.random() < 0.4
        tools, chosen = self.tools() if has_tools else (None, [])
        thinking = r.random() < 0.3
        blocks = r.random() < (0.6 if (thinking or has_tools) else 0.25)
        if r.random() < 0.55:
            sp = r.choice(_SYSTEM_PROMPTS)
            if r.random() < 0.1:
                sp = sp + "\n\n" + _text(r, "medium")
            msgs.append({"role": "system", "content": {"text": sp} if r.random() < 0.2 else sp})
        turns = r.choices(range(1, 9), [30, 22, 14, 10, 8, 6, 5, 5])[0]
        ends_with_user = r.random() < 0.45
        for t in range(turns):
            last = t == turns - 1
            msgs.append(self.user(_size(r)))
            if last and ends_with_user:
                break
            size = _size(r) if r.random() < 0.8 else "short"
            if blocks:
                self.blocks_turn(msgs, chosen, size, last, thinking)
            else:
                self.string_turn(msgs, chosen, size, last)
        if not has_tools and r.random() < 0.1:
            tools = []  # an explicit empty list
        agp = r.random() < (0.9 if msgs[-1]["role"] in ("user", "tool") else 0.1)
        return {"messages": msgs, "tools": tools, "enable_thinking": thinking, "add_generation_prompt": agp}


def render_kwargs(item: dict, dialect: str) -> dict:
    """Keyword arguments for ``apertus_fast.render`` / ``oracle_render`` for one item."""
    return dict(dialect=dialect, tools=item["tools"], enable_thinking=item["enable_thinking"],
                add_generation_prompt=item["add_generation_prompt"], date=DATE)


@lru_cache(maxsize=None)
def _build(dialect: str, n: int, seed: int, mix: str = "swiss"):
    if dialect not in DIALECT_FILES:
        raise ValueError(f"unknown dialect {dialect!r}")
    if mix not in _MIXES:
        raise ValueError(f"unknown language mix {mix!r}: one of {sorted(_MIXES)}")
    if ORACLE_MISSING:
        raise RuntimeError(f"cannot validate the corpus: {ORACLE_MISSING}")
    # (the default mix keeps the seed it always had: the same corpus as before mixes)
    r = _Random(f"apertus-bench:{dialect}:{seed}" + ("" if mix == "swiss" else f":{mix}"), _MIXES[mix])
    gen = _Gen(dialect, r)
    items, texts = [], []
    for i in range(n):
        if mix == "world":
            pools = _MIXES[mix]
            r.langs = [(r.choices([p for p, _ in pools], [w for _, w in pools])[0], 85), (_EN, 15)]
        item = gen.conversation()
        try:
            text = oracle_render(item["messages"], **render_kwargs(item, dialect))
        except OracleError as exc:  # a generator bug: fail loudly, never drop
            raise AssertionError(f"corpus item {i} of {dialect} is rejected by the template: {exc}\n"
                                 f"{json.dumps(item, ensure_ascii=False)[:2000]}") from exc
        items.append(json.dumps(item, ensure_ascii=False))
        texts.append(text)
    # The corpus as a pipeline holds it after reading a JSONL file: ``json.loads`` of
    # each line, in one pass. (Kept as generated, one conversation's objects would be
    # scattered among the garbage of the oracle renders in between, and every renderer
    # would mostly wait on cache misses: apertus-fast took twice as long on that layout,
    # jinja2 about the same.) The benchmarks check every engine against ``texts``.
    items = [json.loads(line) for line in items]
    return tuple(items), tuple(texts)


def corpus(dialect: str, n: int = N, seed: int = 0, mix: str = "swiss") -> list[dict]:
    """``n`` validated conversation items of ``dialect`` (deterministic for ``seed``),
    their prose drawn from the language ``mix``: ``"swiss"`` (English, German, French,
    Italian, some CJK: the benchmarks of record) or ``"world"`` (Cyrillic, CJK, Arabic,
    Devanagari, Greek, some English).

    The items are shared between calls (cached): treat them as read-only."""
    return list(_build(dialect, n, seed, mix)[0])


def rendered(dialect: str, n: int = N, seed: int = 0, mix: str = "swiss") -> list[str]:
    """The official template's rendering of ``corpus(dialect, n, seed, mix)``, item by item."""
    return list(_build(dialect, n, seed, mix)[1])


def summary(dialect: str, n: int = N, seed: int = 0) -> dict:
    items, texts = _build(dialect, n, seed)
    roles = {}
    for it in items:
        for m in it["messages"]:
            roles[m["role"]] = roles.get(m["role"], 0) + 1
    sizes = sorted(len(t.encode()) for t in texts)
    return {
        "dialect": dialect,
        "conversations": len(items),
        "bytes": sum(sizes),
        "median_bytes": sizes[len(sizes) // 2],
        "max_bytes": sizes[-1],
        "with_tools": sum(1 for it in items if it["tools"]),
        "block_assistants": sum(1 for it in items if any(isinstance(m.get("content"), dict) and "blocks" in m["content"] for m in it["messages"])),
        "thinking": sum(1 for it in items if it["enable_thinking"]),
        "generation_prompt": sum(1 for it in items if it["add_generation_prompt"]),
        "messages_by_role": roles,
        "special_tokens": sum(t.count("<|") for t in texts),
        # PEP 393 width of the rendered strings (memory per character: 1, 2 or 4 bytes)
        "str_width": {w: sum(1 for t in texts if _width(t) == w) for w in (1, 2, 4)},
    }


def _width(text: str) -> int:
    m = max(map(ord, text), default=0)
    return 1 if m < 0x100 else 2 if m < 0x10000 else 4


if __name__ == "__main__":
    for d in DIALECTS:
        print(json.dumps(summary(d), ensure_ascii=False))

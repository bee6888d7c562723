"""Scenario builders for generate.py, one function per domain.

Each takes (rng, target_tokens) and returns a scenario dict:
  domain        name
  system        the system prompt (plants the system fact)
  user          [(region, text)] of the opening user turn (plants the user fact)
  plan          the plan the assistant writes first (plants the plan fact)
  rounds        core tool rounds {"think", "calls": [(name, args)], "results": [(text, region)]};
                they plant the tool_in, tool_out, retrieval and scratchpad facts
  extras        optional rounds, inserted before core round extras_at while the
                context budget allows (the first ones first)
  followup      None or (k, [(region, text)]): a user turn before core round k
  continuation  sentences for the teacher-forced scratchpad continuation; they refer
                back to earlier regions without restating the planted answers
  probes        one probe(region, key, question, answer) per region

Every probe's answer is drawn per episode (a Drawn: an id, a number, a
date, a time or a full name) from a space of at least a few hundred equally
likely values, so that a model cannot answer from the question alone; only
the episode's context holds it. For a model to find it by copying, the
answer follows its key phrase (within a few words), the question repeats
that key phrase, and the key phrase occurs once in the episode. A planted
answer appears once in the whole episode, in its own region (tool outputs
do not echo the planted tool_in value, the continuation does not restate
anything), so that a probe tests that region. generate.py checks all of it.

Short contexts (target below 1000 tokens) get compact texts; long ones get
the full texts, longer tool outputs, a follow-up user turn and extras.
"""
import datetime
import json

FIRST_NAMES = ["Amara", "Lukas", "Priya", "Mateo", "Hannah", "Kenji", "Sofia", "Olumide", "Ines", "Tariq",
               "Freya", "Diego", "Mei", "Jonas", "Leila", "Aleksander", "Chloe", "Ravi", "Nora", "Emeka"]
LAST_NAMES = ["Okafor", "Brandt", "Iyer", "Fernandez", "Kowalski", "Tanaka", "Rossi", "Adeyemi", "Moreau",
              "Haddad", "Lindqvist", "Castillo", "Chen", "Weber", "Nasser", "Novak", "Dubois", "Menon"]
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
YEAR = 2025


def person(r):
    return f"{r.choice(FIRST_NAMES)} {r.choice(LAST_NAMES)}"


def code(r, alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", n=6):
    return "".join(r.choice(alphabet) for _ in range(n))


def dumps(value):
    return json.dumps(value, ensure_ascii=False)


# ---- drawn probe answers ----------------------------------------------------------------------

class Drawn(str):
    """A probe answer as it appears in the text, drawn per episode. `space`
    is how many equally likely values the draw had (for a value computed from
    draws: a bound such that no value is likelier than 1/space), so that the
    generator can refuse answers a model could guess; `value` is the drawn
    number or date behind the text. A plain str used as an answer counts as
    a space of 1."""

    def __new__(cls, text, space, value=None):
        self = super().__new__(cls, text)
        self.space = space
        self.value = value
        return self


def number(r, low, high, form="{}"):
    """An integer from [low, high], as form shows it ("{} minutes")."""
    n = r.randint(low, high)
    return Drawn(form.format(n), high - low + 1, n)


def tagged(r, prefix, digits=4):
    """An id such as CR-4821: a fixed prefix and a number of `digits` digits."""
    n = r.randint(10 ** (digits - 1), 10 ** digits - 1)
    return Drawn(f"{prefix}{n}", 9 * 10 ** (digits - 1), n)


def letters(r, prefix="", alphabet="ABCDEFGHJKLMNPQRSTUVWXYZ23456789", n=6):
    """An id of n characters from alphabet, such as a booking locator."""
    return Drawn(prefix + code(r, alphabet, n), len(alphabet) ** n)


def full_name(r):
    return Drawn(person(r), len(FIRST_NAMES) * len(LAST_NAMES))


def day_month(date):
    return f"{date.day} {MONTH_NAMES[date.month - 1]}"


def calendar_day(r, form=day_month, weekdays_only=False):
    """A day of YEAR ("14 March", or form(date)); weekdays_only: Monday to Friday."""
    days = [datetime.date(YEAR, 1, 1) + datetime.timedelta(days=k) for k in range(365)]
    if weekdays_only:
        days = [d for d in days if d.weekday() < 5]
    date = r.choice(days)
    return Drawn(form(date), len(days), date)


def clock(r, first, last):
    """A time of day HH:MM, minute first to minute last of the day."""
    m = r.randint(first, last)
    return Drawn(f"{m // 60:02d}:{m % 60:02d}", last - first + 1, m)


def probe(region, key, question, answer):
    """A planted fact: the question asks for answer by repeating key, the
    phrase that answer follows in the episode. generate.py writes region,
    question and answer to the trace, and key and the answer's draw space
    to the episode's meta."""
    return {"region": region, "key": key, "question": question, "answer": answer}


# ---- shared text helpers ----------------------------------------------------------------------

def rnd(think, calls, results):
    return {"think": think, "calls": calls, "results": results}


def big(target):
    return target >= 1000


def opt(r, small, text):
    """Optional reasoning: always in long contexts, sometimes in short ones."""
    return text if not small or r.random() < 0.4 else None


def more(r, small, text):
    """Extra detail: always in long contexts, in about half of the short ones."""
    return text if not small or r.random() < 0.5 else ""


def sometimes(r, small, followup):
    """A follow-up user turn: always in long contexts, in about a third of the short ones."""
    return followup if not small or r.random() < 0.35 else None


def plan_text(steps):
    return "Plan:\n" + "".join(f"{i}. {step}\n" for i, step in enumerate(steps, 1))


def shuffled(r, items):
    items = list(items)
    r.shuffle(items)
    return items


# Generic reasoning that may pad a continuation: it refers to the session in
# general terms only.
CONTINUATION_FILLER = [
    "I should not rely on memory for any of the identifiers; each one has to be copied from the message where it first appeared.",
    "It is also worth re-reading the user's first message once more, because the wording there sets the priorities for the final answer.",
    "None of the tool calls so far returned an error, so there is no reason to repeat them.",
    "If anything in my draft contradicts the instructions at the top of the conversation, the instructions win.",
    "I will keep the reply short: a summary first, then the details the user will need to act on it.",
    "Before sending anything, I want to double-check that every number I quote has a source earlier in this session.",
    "There is one open question I cannot settle with the tools I have, so I will state it plainly instead of guessing.",
    "Looking back over the results, the second tool response is the one that matters most for the decision.",
    "I will mention the trade-off explicitly so that the user can overrule my choice if their priorities differ.",
    "It would be easy to over-explain here, so I will only include what changes the user's next action.",
    "Where the documentation and the live data disagree, I will trust the live data and point out the difference.",
]


# ---- travel booking -------------------------------------------------------------------------

AIRPORTS = [("Berlin", "BER"), ("Lisbon", "LIS"), ("Vienna", "VIE"), ("Copenhagen", "CPH"),
            ("Madrid", "MAD"), ("Dublin", "DUB"), ("Prague", "PRG"), ("Milan", "MXP"),
            ("Athens", "ATH"), ("Helsinki", "HEL"), ("Brussels", "BRU"), ("Zurich", "ZRH")]
AIRLINES = [("TP", "TAP Air Portugal"), ("LH", "Lufthansa"), ("OS", "Austrian"), ("SK", "SAS"),
            ("IB", "Iberia"), ("EI", "Aer Lingus"), ("AZ", "ITA Airways"), ("A3", "Aegean")]
ORDINALS = ["first", "second", "third", "fourth"]


def weekday_phrase(date):
    """How a traveller names a day: "the third Tuesday of July"."""
    last = (date + datetime.timedelta(days=7)).month != date.month
    nth = "last" if last else ORDINALS[(date.day - 1) // 7]
    return f"the {nth} {WEEKDAYS[date.weekday()]} of {MONTH_NAMES[date.month - 1]}"


def travel(r, target):
    small = not big(target)
    name = person(r)
    (city_a, iata_a), (city_b, iata_b) = r.sample(AIRPORTS, 2)
    carrier, airline = r.choice(AIRLINES)
    departure = calendar_day(r, form=datetime.date.isoformat)
    connection = number(r, 40, 250, "{} minutes")
    employee = number(r, 10000, 99999)
    cost_centre = tagged(r, "CC-")
    locator = letters(r)
    change_fee = number(r, 30, 260, "{} EUR")
    light, bag = r.randint(118, 400), r.choice([35, 40, 45])
    # For a given bag price the total is one-to-one with the drawn Light fare.
    total = Drawn(f"{light + bag} EUR", 400 - 118 + 1)
    classic = light + bag - r.randint(8, 30)
    preference = r.choice(["I'm bringing my cello, it needs its own seat.",
                           "Nothing landing after 22:00 please.",
                           "A seat over the wing would help, I get motion sick."])
    times = [(7, 5), (10, 20), (13, 45), (17, 10), (19, 35)][:2 if small else 5]
    flights = [{"flight": f"{carrier} {r.randint(100, 989)}", "dep": f"{h:02d}:{m:02d}", "eur": light if i == 0 else light + r.randint(15, 140)}
               | ({} if small else {"arr": f"{h + 2 + r.randint(0, 1):02d}:{(m + 35) % 60:02d}", "stops": 0 if i == 0 else r.randint(0, 1)})
               for i, (h, m) in enumerate(times)]
    chosen = flights[0]["flight"]
    system = (f"You are the travel agent of Northwind Consulting. Never go below the minimum connection time of {connection}."
              + more(r, small, " Book economy unless a manager approves otherwise. Quote prices in EUR including taxes, "
                                  "and never purchase without the traveller's explicit confirmation."))
    user = [("user", f"Hi, {name} here, employee number {employee}. I need to fly {city_a} to {city_b} on {weekday_phrase(departure.value)}. {preference}"
                     + more(r, small, " It's for a client workshop, so arriving the evening before is fine too."))]
    plan = plan_text(["Search flights.", "Check the fare rules.", f"Hold for 24 hours under cost centre {cost_centre}; do not buy."]
                     + ([] if small else ["Summarise the options and wait for the traveller's OK."]))
    args = {"origin": iata_a, "destination": iata_b, "departure_date": departure} | ({} if small else {"cabin": "economy", "adults": 1, "max_stops": 1})
    fare_doc = (f"{airline} fares. Light: personal item only. Classic: adds a cabin bag; the change fee is {change_fee}."
                + more(r, small, " Plus: adds a 23 kg checked bag and free changes until 24 hours before departure. "
                                    "Personal items must fit 40 x 30 x 15 cm on all fares."))
    rounds = [
        rnd(opt(r, small, "Outbound search first."), [("search_flights", args)], [(dumps({"flights": flights}), "tool_out")]),
        rnd(opt(r, small, f"{chosen} is the earliest nonstop. Baggage rules before I hold it."),
            [("search_policies", {"query": f"{airline} fare families"})], [(fare_doc, "retrieval")]),
        rnd(f"Light at {light} EUR plus a {bag} EUR bag is a trip total of {total}; Classic at {classic} EUR includes the bag.",
            [("hold_booking", {"flight": chosen, "fare": "Classic", "hours": 24})],
            [(dumps({"status": "held", "locator": locator, "paid": False}), "tool_out")]),
    ]
    area = r.choice(["the congress centre", "the old town", "the main station", "the riverside campus"])
    hotels = ["Hotel Aurora", "Casa do Rio", "Stadtpalais", "The Foundry", "Villa Nord", "Hotel Meridian", "Lindenhof", "Harbour Inn"]
    extras = shuffled(r, [
        rnd("The traveller needs a way back as well; checking Sunday evening returns.",
            [("search_flights", {"origin": iata_b, "destination": iata_a, "date": "sunday-after", "cabin": "economy", "max_stops": 0})],
            [(dumps({"flights": [{"flight": f"{carrier} {r.randint(100, 989)}", "dep": t, "arr": f"{int(t[:2]) + 3:02d}:{t[3:]}", "eur": r.randint(90, 260), "seats_left": r.randint(1, 9)} for t in ["15:40", "18:15", "20:05"]]}), "tool_out")]),
        rnd(f"A hotel near {area} keeps the commute short on the workshop morning.",
            [("search_hotels", {"city": city_b, "near": area, "nights": 2, "max_price_eur": 180, "sort": "distance"})],
            [(dumps({"hotels": [{"name": n, "distance_km": round(r.uniform(0.2, 2.5), 1), "eur_per_night": r.randint(95, 175), "rating": round(r.uniform(7.6, 9.3), 1), "breakfast": r.choice([True, False])} for n in r.sample(hotels, 4)]}), "tool_out")]),
        rnd("Northwind caps hotel spending per city; I should check the allowance before suggesting anything.",
            [("search_policies", {"query": f"hotel allowance {city_b}"})],
            [(f"Northwind travel policy, section 3.4 - accommodation. The nightly allowance, breakfast included, is {r.choice([150, 160, 170, 185])} EUR in {city_b}. "
              "Stays above the allowance need a written business reason in the booking notes and the approval of the budget owner. "
              "Loyalty points may be kept by the traveller. Shared rooms are never required.", "retrieval")]),
        rnd("Getting from the airport to the venue matters for an early start.",
            [("get_ground_transport", {"from": iata_b, "to": area, "arrive_by": "09:30", "modes": ["metro", "bus", "taxi"]})],
            [(dumps({"options": [{"mode": "metro", "minutes": r.randint(25, 45), "eur": 2.1, "changes": 1}, {"mode": "bus", "minutes": r.randint(35, 55), "eur": 1.8, "changes": 0}, {"mode": "taxi", "minutes": r.randint(18, 30), "eur": r.randint(28, 45)}]}), "tool_out")]),
        rnd("A quick look at the weather, worth a line in the summary.",
            [("get_forecast", {"city": city_b, "days": 3})],
            [(dumps({"forecast": [{"day": d, "high_c": r.randint(17, 31), "low_c": r.randint(9, 16), "rain_mm": r.choice([0, 0, 1.5, 6])} for d in ["Fri", "Sat", "Sun"]]}), "tool_out")]),
        rnd("Seat availability on the outbound flight, so I can say what is left.",
            [("get_seat_map", {"flight": chosen, "cabin": "economy"})],
            [(dumps({"free": {"window": r.randint(2, 9), "aisle": r.randint(1, 7), "middle": r.randint(5, 20), "exit_row": r.randint(0, 2)}, "extra_legroom_eur": 29, "seat_selection_eur": 12}), "tool_out")]),
        rnd("Entry requirements, in case the traveller's passport situation matters.",
            [("search_policies", {"query": f"entry requirements {city_b} business trip"})],
            [(f"Travel advisory digest. Travellers from EU and EEA countries need a valid identity card or passport to enter for business; "
              f"no visa is required for stays under 90 days in any 180. Paid work at a client site may need a posted-worker notification, "
              f"which the HR travel desk files; allow three working days.", "retrieval")]),
        rnd("The client may reimburse part of the trip; checking how Northwind books those.",
            [("search_policies", {"query": "client rebillable travel booking notes"})],
            [("Finance guideline 12: when a client reimburses travel, add the project code to the booking notes and keep the hold confirmation. "
              "Rebillable trips follow the same class and allowance rules as internal trips; upgrades are never rebillable.", "retrieval")]),
        rnd("Checking whether the traveller's corporate card is on file for the booking.",
            [("get_traveller_profile", {"name": name, "fields": ["card_on_file", "frequent_flyer", "home_airport"]})],
            [(dumps({"card_on_file": True, "frequent_flyer": [{"programme": "Miles&More", "tier": "base"}], "home_airport": iata_a, "notes": "prefers morning flights"}), "tool_out")]),
        rnd("Train alternative, since some companies prefer rail under six hours.",
            [("search_trains", {"from": city_a, "to": city_b, "date": "same-day", "max_hours": 10})],
            [(dumps({"connections": [{"dep": "06:12", "hours": round(r.uniform(9, 14), 1), "changes": r.randint(2, 4), "eur": r.randint(119, 240)}]}), "tool_out")]),
    ])
    return {
        "domain": "travel", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 2,
        "followup": sometimes(r, small, (2, [("user", f"Oh, and if it's easy, a hotel near {area} for two nights would be great.")])),
        "continuation": [
            f"Let me put the answer for {name.split()[0]} together.",
            "First the constraints: the connection rule from my instructions rules out one of the one-stop options, and the request itself adds a personal condition I have to honour when I suggest alternatives.",
            "The hold is in place, so I must quote the booking reference exactly as the booking system returned it and say clearly that nothing has been paid yet.",
            "My comparison of the two fare families showed which one is cheaper once the cabin bag is counted, and the fare document says what a later change would cost.",
            "The plan says not to buy yet and names the budget the hold goes on, so the reply ends with a question rather than a purchase.",
            "I will also mention when the hold expires, which follows from the hold length I asked for, and the travel day exactly as I searched it.",
        ],
        "probes": [
            probe("system", "minimum connection time", "What minimum connection time must the agent respect?", connection),
            probe("user", "employee number", "What is the traveller's employee number?", employee),
            probe("plan", "cost centre", "Under which cost centre does the plan say to place the hold?", cost_centre),
            probe("tool_in", "departure date", "What departure date did the agent search for?", departure),
            probe("tool_out", "locator", "What locator did the hold return?", locator),
            probe("retrieval", "change fee", "What change fee does the fare document give for Classic?", change_fee),
            probe("scratchpad", "trip total", "What trip total did the agent work out for Light plus a bag?", total),
        ],
    }


# ---- code debugging -------------------------------------------------------------------------

REPOS = ["ledgerline", "invoicer", "payroll-core", "billing-svc", "tally"]


def code_debugging(r, target):
    small = not big(target)
    repo = r.choice(REPOS)
    forbidden = r.choice(["vendor/", "migrations/", "third_party/"])
    pyver = r.choice(["3.8", "3.9"])
    change_request = tagged(r, "CR-")
    account = number(r, 10000, 99999)
    branch = tagged(r, "bugfix-")
    seed = number(r, 10000, 99999)
    invoice = tagged(r, "INV-", 5)
    owner = full_name(r)
    amount = number(r, 100, 999)
    used = r.randint(1, 30)
    # For a given number of used days the result is one-to-one with the drawn
    # amount, so no result is likelier than one amount.
    prorated = Drawn(f"{amount.value * used / 31:.2f} EUR", amount.space)
    test_name = r.choice(["test_export_handles_leap_day", "test_prorate_month_end", "test_partial_period_on_29th"])
    line = r.randint(71, 118)
    fix = "(period_end - period_start).days + 1"
    system = (f"You are a coding agent in the {repo} repository. Every commit must quote change request {change_request}."
              + more(r, small, f" Never edit anything under {forbidden}, run the relevant tests before proposing a patch "
                                  "and keep patches under 40 changed lines."))
    user = [("user", f"The nightly invoice export crashed on account number {account}, billed on the 29th. "
                     f"Our batch hosts run Python {pyver}, so no newer syntax."
                     + more(r, small, " Can you find the cause and fix it? Finance re-runs the export at six."))]
    plan = plan_text(["Reproduce with the tests.", "Write a regression test before the fix.", f"Patch on fix branch {branch} and rerun."]
                     if small else ["Reproduce the crash with the billing tests.", "Read the code the traceback points to.",
                                    "Write a regression test before the fix.", f"Patch on fix branch {branch}, rerun the suite, summarise."])
    traceback = (f"FAILED tests/billing/test_export.py::{test_name}\n"
                 f"src/billing/proration.py:{line}: ZeroDivisionError: division by zero\n"
                 f"captured log: invoice_id={invoice}"
                 + more(r, small, f"\n1 failed, {r.randint(40, 90)} passed in {r.uniform(2, 9):.2f}s"))
    handbook = (f"Billing handbook 2.3: proration counts calendar days, both ends included. Changes need the billing owner, {owner}."
                + more(r, small, " Credit notes use the same rule; periods are stored in the customer's billing time zone, never in UTC."))
    rounds = [
        rnd(opt(r, small, "Reproducing first, with a fixed seed so the randomised test order is stable."),
            [("run_tests", {"path": "tests/billing", "random_seed": seed.value} | ({} if small else {"keyword": "export or prorate", "verbose": True}))],
            [(traceback, "tool_out")]),
        rnd(opt(r, small, "Before choosing a fix, the team's own rule for proration."),
            [("search_docs", {"query": "proration rule billing handbook", "source": "team-wiki"})], [(handbook, "retrieval")]),
        rnd(f"period_end.day - period_start.day is 0 from the 29th to the 29th, hence the crash; the length must be {fix}, "
            f"so the failing account's prorated amount is {prorated}.",
            [("write_file", {"path": "tests/billing/test_29th.py", "content": "def test_29th():\n    assert prorate(30, JAN_29, FEB_29, FEB_14) > 0\n"})],
            [(dumps({"written": True}), "tool_out")]),
    ]
    source = (f"{line - 3}  def prorate(amount, period_start, period_end, used_until):\n"
              f"{line - 2}      period_days = period_end.day - period_start.day\n"
              f"{line - 1}      used_days = (used_until - period_start).days\n"
              f"{line}      ratio = used_days / period_days\n{line + 1}      return round(amount * ratio, 2)")
    first = [rnd("The traceback points into prorate(); reading the function.",
                 [("read_file", {"path": "src/billing/proration.py", "start_line": line - 3, "end_line": line + 1})], [(source, "tool_out")])]
    extras = first + shuffled(r, [
        rnd("Who touched this function last, and why? That tells me whether the bug is new.",
            [("git_log", {"path": "src/billing/proration.py", "max_count": 4})],
            [("\n".join(f"{code(r, '0123456789abcdef', 7)} {msg} ({person(r).split()[0]}, {r.randint(2, 40)} days ago)" for msg in r.sample(["Refactor proration helpers", "Support mid-cycle upgrades", "Fix rounding in credit notes", "Bump dependencies", "Add export retries"], 4)), "tool_out")]),
        rnd("Other callers could depend on the old behaviour, so I need the full list.",
            [("grep", {"pattern": "prorate\\(", "path": "src/", "max_results": 20})],
            [("\n".join(f"src/{p}:{r.randint(10, 300)}:    total += prorate({a})" for p, a in [("billing/invoice.py", "line.amount, start, end, today"), ("billing/credits.py", "credit, start, end, cancelled_at"), ("reports/mrr.py", "plan.price, start, end, as_of"), ("exports/nightly.py", "row.amount, row.start, row.end, run_date")]), "tool_out")]),
        rnd("The CI configuration decides where the patch is tested.",
            [("read_file", {"path": ".ci/pipeline.yml", "start_line": 1, "end_line": 12})],
            [("stages: [lint, test, package]\ntest:\n  image: registry.local/python-batch:stable\n  script:\n    - pip install -r requirements.txt\n    - pytest -q -p randomly tests/\n  artifacts:\n    reports: [junit.xml]\npackage:\n  only: [main]", "tool_out")]),
        rnd("The exact semantics of date subtraction, before I rely on it.",
            [("search_docs", {"query": "date subtraction timedelta", "source": "python-docs"})],
            [("date objects: date1 - date2 gives a timedelta; for dates its seconds and microseconds are always 0. "
              "The result is exact and cannot overflow; timedelta.days may be negative when date2 is later.", "retrieval")]),
        rnd("Linting the module before I change it, to separate old warnings from new ones.",
            [("run_linter", {"path": "src/billing/proration.py", "tool": "flake8"})],
            [(f"src/billing/proration.py:{line - 2}:5: B950 line too long (94 > 88 characters)\nsrc/billing/proration.py:12:1: F401 'math' imported but unused\nsrc/billing/proration.py:40:1: E302 expected 2 blank lines, found 1", "tool_out")]),
        rnd("A baseline of the whole suite, to know what was already failing.",
            [("run_tests", {"path": "tests/", "verbose": False})],
            [(f"{r.randint(300, 700)} passed, 1 failed, {r.randint(1, 6)} skipped, 2 warnings in {r.uniform(20, 70):.1f}s\nwarnings: DeprecationWarning: datetime.utcnow() is deprecated (tests/conftest.py:18)", "tool_out")]),
        rnd("The invoice module rounds amounts after proration; I want to see how.",
            [("read_file", {"path": "src/billing/invoice.py", "start_line": 40, "end_line": 47})],
            [("40  def line_total(line, start, end, today):\n41      base = prorate(line.amount, start, end, today)\n42      if line.discount:\n43          base -= base * line.discount\n44      return quantize(base)\n45\n46  def quantize(x):\n47      return Decimal(x).quantize(Decimal('0.01'), ROUND_HALF_UP)", "tool_out")]),
        rnd("Is there a known issue about month lengths already?",
            [("search_issues", {"query": "proration 29th 30th 31st month length", "state": "all"})],
            [(dumps({"issues": [{"id": r.randint(300, 900), "title": "Credit note off by one day for February", "state": "closed"}, {"id": r.randint(900, 1200), "title": "Nightly export slow on month end", "state": "open"}]}), "tool_out")]),
        rnd("How does the export job call the billing code? The crash came from there.",
            [("read_file", {"path": "src/exports/nightly.py", "start_line": 20, "end_line": 27})],
            [("20  def export_rows(rows, run_date):\n21      for row in rows:\n22          try:\n23              yield row.customer_id, prorate(row.amount, row.start, row.end, run_date)\n24          except ValueError:\n25              log.warning('skipping %s', row.customer_id)\n26      # ZeroDivisionError is not caught on purpose: bad data must stop the export\n27      metrics.increment('export.rows')", "tool_out")]),
    ])
    return {
        "domain": "code_debugging", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 1,
        "followup": sometimes(r, small, (2, [("user", "If the fix changes invoice totals for other customers, tell me which ones before merging.")])),
        "continuation": [
            "Now the actual patch.",
            "The regression test is written, as the plan asked, so the next step is the one-line change in prorate() that my analysis pointed to, and nothing else in that function.",
            "I have to make sure the new expression only uses syntax the batch hosts can run, given the interpreter version the user mentioned.",
            "The handbook I looked up counts calendar days inclusively, so the result is exact, and it names the person who has to sign the change off.",
            "I will rerun the failing test with the same seed as before, then the whole billing directory, and push to the branch the plan named.",
            "The commit message needs the reference from my instructions, and the reply should name the failing customer the user reported.",
        ],
        "probes": [
            probe("system", "change request", "Which change request must every commit quote?", change_request),
            probe("user", "account number", "What account number did the user report the crash on?", account),
            probe("plan", "fix branch", "Which fix branch does the plan name?", branch),
            probe("tool_in", "random seed", "Which random seed did the agent pass to the test runner?", seed),
            probe("tool_out", "invoice id", "What invoice id did the captured log of the failing test show?", invoice),
            probe("retrieval", "billing owner", "Who is the billing owner named in the handbook?", owner),
            probe("scratchpad", "prorated amount", "What prorated amount did the agent work out?", prorated),
        ],
    }


# ---- data analysis ------------------------------------------------------------------------

MONTHS = [("March", "2025-03"), ("April", "2025-04"), ("May", "2025-05"), ("June", "2025-06")]


def data_analysis(r, target):
    small = not big(target)
    month, ym = r.choice(MONTHS)
    churned = r.randint(1100, 1900)
    base = r.randint(2600, 3400)
    grace = r.choice([7, 14, 21])
    bullets = r.choice(["three", "four", "five"])
    sample = number(r, 100, 999, "{} rows")
    name = full_name(r)
    snapshot = tagged(r, "snap-")
    tag = tagged(r, "churn-")
    scanned = number(r, 100000, 999999)
    steward = full_name(r)
    rate = number(r, 200, 499)
    rate = Drawn(f"{rate.value / 100:.2f}%", rate.space)
    system = (f"You are a data analysis agent with read-only SQL access. The minimum sample size is {sample} for any reported figure."
              + more(r, small, " Report money in EUR rounded to the nearest thousand, never quote raw customer emails, "
                                  "and show the query behind every number you report."))
    user = [("user", f"DACH churn jumped in {month}, is it real? It's for the board pack, {bullets} bullet points at most. Log me as requester, {name}."
                     + more(r, small, " Finance is nervous and wants an answer before Thursday."))]
    plan = plan_text(["Check the churn definition.", f"Count churn by month on warehouse snapshot {snapshot}.",
                      "Check the spike for data-quality problems."] + ([] if small else ["Write the summary with the queries."]))
    months = [("2025-01", base - r.randint(50, 200)), ("2025-02", base - r.randint(0, 150)), (ym, churned)]
    rounds = [
        rnd(opt(r, small, "The definition of churn decides everything else, so the dictionary comes first."),
            [("search_docs", {"query": "churn definition"})],
            [(f"Data dictionary: churned means cancelled and not reactivated within {grace} days. Metric steward: {steward}."
              + more(r, small, " Trials never count. mrr_cents is stored in euro cents; other currencies are converted at the month-end rate."), "retrieval")]),
        rnd(opt(r, small, "Churn per month for Austria, Switzerland and Germany."),
            [("run_sql", {"query": "SELECT month, count(*) FROM churn WHERE country IN ('AT','CH','DE') GROUP BY 1"
                          if small else "SELECT to_char(cancelled_at, 'YYYY-MM') AS month, count(*) AS churned FROM analytics.subscriptions "
                                        "WHERE country IN ('AT','CH','DE') AND status = 'churned' AND cancelled_at >= '2025-01-01' GROUP BY 1 ORDER BY 1",
                          "query_tag": tag})],
            [(dumps({"rows": [[m, c] for m, c in months], "rows_scanned": scanned.value}), "tool_out")]),
        rnd(f"Half of the {month} cancellations come from one import batch, likely duplicates; without it the adjusted churn rate is {rate}, like earlier months.",
            [("run_sql", {"query": f"SELECT import_batch, count(*) FROM churn WHERE month = '{ym}' GROUP BY 1"})],
            [(dumps({"rows": [[f"cx-import-{ym[-2:]}17", churned // 2], ["nightly", churned // 3]]}), "tool_out")]),
    ]
    extras = shuffled(r, [
        rnd("Revenue impact, for finance; the dictionary says amounts are stored in cents.",
            [("run_sql", {"query": f"SELECT sum(mrr_cents) / 100 AS mrr_eur, count(DISTINCT customer_id) FROM analytics.subscriptions WHERE to_char(cancelled_at, 'YYYY-MM') = '{ym}' AND status = 'churned'"})],
            [(dumps({"columns": ["mrr_eur", "customers"], "rows": [[f"{r.randint(180, 420) * 1000 + r.randint(0, 999)}.{r.randint(10, 99)}", r.randint(900, 1500)]]}), "tool_out")]),
        rnd("The table layout, so I join on the right keys.",
            [("describe_table", {"table": "analytics.subscriptions"})],
            [("customer_id text, plan text, country char(2), status text, started_at timestamptz, cancelled_at timestamptz, "
              "reactivated_at timestamptz, mrr_cents bigint, import_batch text, is_trial boolean, sales_channel text, seats integer", "tool_out")]),
        rnd("A split by plan, in case one plan drives the change.",
            [("run_sql", {"query": f"SELECT plan, count(*) FROM analytics.subscriptions WHERE status = 'churned' AND to_char(cancelled_at, 'YYYY-MM') = '{ym}' GROUP BY 1 ORDER BY 2 DESC"})],
            [(dumps({"columns": ["plan", "count"], "rows": [["starter", r.randint(300, 700)], ["team", r.randint(200, 500)], ["business", r.randint(60, 160)], ["enterprise", r.randint(10, 60)]]}), "tool_out")]),
        rnd("How the CRM imports are supposed to work, to judge whether a duplicate is plausible.",
            [("search_docs", {"query": "cx-import pipeline reruns duplicates", "collection": "data-platform-runbooks"})],
            [("Runbook: CX imports. The CRM export runs weekly and writes one batch per run, named cx-import-MMDD. A rerun after a failed load creates a new batch id "
              "without removing the rows of the failed one, so a failed week can appear twice. Analysts should deduplicate on (customer_id, cancelled_at) before counting.", "retrieval")]),
        rnd("A chart of the monthly series for the board pack.",
            [("plot", {"kind": "bar", "x": "month", "y": "churned", "title": "DACH churn by month", "source_query": "q2", "annotate_max": True})],
            [(dumps({"image": "charts/dach-churn.png", "width": 960, "height": 540, "alt": "bar chart of monthly churn"}), "tool_out")]),
        rnd("Reactivations could also explain part of the spike.",
            [("run_sql", {"query": f"SELECT count(*) FROM analytics.subscriptions WHERE reactivated_at IS NOT NULL AND to_char(cancelled_at, 'YYYY-MM') = '{ym}'"})],
            [(dumps({"columns": ["count"], "rows": [[r.randint(60, 160)]]}), "tool_out")]),
        rnd("The warehouse load log should show whether an import was rerun.",
            [("run_sql", {"query": "SELECT batch, loaded_at, rows_loaded, status FROM ops.load_log WHERE batch LIKE 'cx-import-%' ORDER BY loaded_at DESC LIMIT 4"})],
            [(dumps({"columns": ["batch", "loaded_at", "rows_loaded", "status"], "rows": [[f"cx-import-{ym[-2:]}{d}", f"{ym}-{d} 0{r.randint(1, 5)}:1{r.randint(0, 9)}", r.randint(2000, 9000), s] for d, s in [(17, "ok"), (16, "failed"), (10, "ok"), ("03", "ok")]]}), "tool_out")]),
        rnd("Sales channel, because partner-sold accounts churn differently.",
            [("run_sql", {"query": f"SELECT sales_channel, count(*) FROM analytics.subscriptions WHERE status = 'churned' AND to_char(cancelled_at, 'YYYY-MM') = '{ym}' GROUP BY 1"})],
            [(dumps({"columns": ["sales_channel", "count"], "rows": [["self-serve", r.randint(500, 900)], ["partner", r.randint(100, 300)], ["direct", r.randint(50, 200)]]}), "tool_out")]),
        rnd("What counts as a board-ready metric, per the analytics handbook.",
            [("search_docs", {"query": "board metrics reporting guidelines", "collection": "analytics-handbook"})],
            [("Analytics handbook 5.1: board metrics are reported monthly with the previous quarter for comparison. Any number that changed by more than 20% "
              "month on month needs a sentence explaining the change, and preliminary numbers must be labelled as such.", "retrieval")]),
        rnd("Checking cohorts: did the churned accounts start recently?",
            [("run_sql", {"query": f"SELECT to_char(started_at, 'YYYY') AS cohort, count(*) FROM analytics.subscriptions WHERE status = 'churned' AND to_char(cancelled_at, 'YYYY-MM') = '{ym}' GROUP BY 1 ORDER BY 1"})],
            [(dumps({"columns": ["cohort", "count"], "rows": [[str(y), r.randint(100, 500)] for y in range(2021, 2026)]}), "tool_out")]),
    ])
    return {
        "domain": "data_analysis", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 2,
        "followup": sometimes(r, small, (2, [("user", "Could you also give me the revenue we lost, so finance has a number to argue with?")])),
        "continuation": [
            "Time to write the summary for the board pack.",
            "The user set a limit on the number of bullet points, so every bullet has to carry one finding, with the query next to it.",
            "The first bullet is the definition: the dictionary's grace period for reactivations changes what counts as churn, and I should say who owns that definition.",
            "The second is the count from the regional query, compared with January and February, and how much data the warehouse read for it.",
            "The third is the data-quality issue the plan told me to look for, and the rate I computed once the suspicious batch is left out.",
            "Every figure has to clear the sample rule from my instructions, and the numbers must come from the snapshot the plan fixed.",
        ],
        "probes": [
            probe("system", "minimum sample size", "What minimum sample size applies to any reported figure?", sample),
            probe("user", "requester", "Who is the requester of the analysis?", name),
            probe("plan", "warehouse snapshot", "Which warehouse snapshot does the plan say to work on?", snapshot),
            probe("tool_in", "query tag", "What query tag did the agent set on the churn query?", tag),
            probe("tool_out", "rows scanned", "What rows_scanned value did the churn query return?", scanned),
            probe("retrieval", "metric steward", "Who is the metric steward in the data dictionary?", steward),
            probe("scratchpad", "adjusted churn rate", "What adjusted churn rate did the agent compute?", rate),
        ],
    }


# ---- customer support ------------------------------------------------------------------------

PRODUCTS = [("blender", "BL"), ("kettle", "KT"), ("stand mixer", "SM"), ("espresso machine", "EM"), ("air fryer", "AF")]
COLORS = [("sage green", "SG"), ("matte black", "MB"), ("cream", "CR"), ("copper", "CU")]


def customer_support(r, target):
    small = not big(target)
    shop = r.choice(["Hearth & Co.", "Kitchenly", "Casa Nova Home", "Brightpan"])
    product, family = r.choice(PRODUCTS)
    model = r.randint(100, 999)
    sku = f"{family}-{model}"
    (color, color_code), (_, old_code) = r.sample(COLORS, 2)
    replacement_sku = Drawn(f"{sku}-{color_code}", 900 * len(PRODUCTS) * len(COLORS))
    limit = number(r, 100, 499, "{} EUR")
    phone = number(r, 1000, 9999)
    case = tagged(r, "CS-", 5)
    rma = tagged(r, "RT-", 5)
    claim_account = tagged(r, "CA-")
    price = r.randint(89, 329)
    # The shipping is fixed, so the value is one-to-one with the drawn price.
    value = Drawn(f"{price + 4.95:.2f} EUR", 329 - 89 + 1)
    tracking = "JJD" + code(r, "0123456789", 13)
    reason = r.choice(["DMG-TRANSIT", "DOA-CRACK", "DMG-PACKAGING"])
    day = r.randint(5, 24)
    order = f"ORD-{r.randint(10000, 99999)}"
    customer = person(r)
    leipzig, venlo = r.randint(0, 20), r.randint(1, 20)
    system = (f"You are the support agent of {shop}. Your refund limit is {limit}; above it you need a supervisor."
              + more(r, small, " Never promise a delivery date; say what the carrier says. Keep replies short and friendly."))
    user = [("user", f"Hi, {customer} here. My {product} arrived cracked. No refund please, I'd like a replacement in {color}. "
                     f"My phone number ends in {phone}."
                     + more(r, small, " The box looked fine from outside, so I only noticed when I unpacked it this morning."))]
    plan = plan_text(["Find the order.", "Check the damage policy.", f"Replace it and log everything under case number {case}."]
                     if small else ["Find the order and the delivery.", "Check the damage policy.", "Create a replacement, not a refund.",
                                    f"Send the prepaid return label and log everything under case number {case}."])
    order_row = {"order": order, "item": f"{sku}-{old_code}", "status": "delivered"}
    if not small:
        order_row |= {"tracking": tracking, "price_eur": price, "carrier": "DHL", "delivered": f"{day} days ago"}
    rounds = [
        rnd(opt(r, small, "Looking up the order first."),
            [("lookup_orders", {"customer": customer, "product": product})], [(dumps({"orders": [order_row]}), "tool_out")]),
        rnd(opt(r, small, "What does the policy say about items damaged on arrival?"),
            [("kb_search", {"query": "damaged on arrival"})],
            [(f"Policy 4.2: damaged items are replaced free within 30 days once a photo of the damage is in; "
              f"carrier claims quote claim account {claim_account}."
              + more(r, small, " The damaged item goes back with a prepaid label; customers never pay return shipping."), "retrieval")]),
        rnd(f"Day {day} of the 30-day window, so a replacement is fine; {price} EUR plus 4.95 EUR shipping makes a replacement value of {value}.",
            [("create_replacement", {"order": order, "replacement_sku": replacement_sku} | ({} if small else {"reason": reason}))],
            [(dumps({"rma": rma, "status": "awaiting_photo"}), "tool_out")]),
    ]
    extras = shuffled(r, [
        rnd("Is the colour in stock? A replacement should not wait on a backorder.",
            [("check_stock", {"product": product, "colour": color, "warehouse": "all"})],
            [(dumps({"available": leipzig + venlo, "by_warehouse": {"Leipzig": leipzig, "Venlo": venlo}, "backorder": False, "next_restock": None}), "tool_out")]),
        rnd("Earlier tickets from this customer, to get the tone right.",
            [("get_ticket_history", {"customer": customer, "limit": 5})],
            [(dumps({"tickets": [{"id": f"T-{r.randint(10000, 99999)}", "topic": t, "closed": True, "csat": r.randint(3, 5)} for t in r.sample(["late delivery", "invoice copy", "discount code", "address change", "missing part"], 3)]}), "tool_out")]),
        rnd("Carrier events, so I describe the delivery correctly.",
            [("track_parcel", {"carrier": "DHL", "order": order})],
            [(dumps({"events": [{"when": f"day -{day + k}", "event": e, "location": loc} for k, (e, loc) in enumerate([("delivered, signed by neighbour", "customer street"), ("out for delivery", "local depot"), ("in transit", "hub Leipzig"), ("picked up", "warehouse")])]}), "tool_out")]),
        rnd("How long replacements usually take to ship, so I can describe the process without promising a date.",
            [("kb_search", {"query": "replacement shipping time standard"})],
            [("Shipping guide: replacements leave the warehouse one to two working days after the photo is approved. Standard delivery then takes two to four "
              "working days in Germany and Austria and three to six elsewhere in the EU. Express upgrades are free for damaged-item replacements on request.", "retrieval")]),
        rnd("Has this product line a known defect? That would change the wording.",
            [("kb_search", {"query": f"{sku} known issues cracked"})],
            [(f"Engineering note {family}-17: a batch from supplier lot 2024-11 showed hairline cracks after drops in transit. Affected units are replaced without "
              "questions; there is no safety recall. Packaging was reinforced from February, and new units ship in the double-wall box.", "retrieval")]),
        rnd("The standard message for photo requests, to adapt rather than write from scratch.",
            [("get_macro", {"name": "replacement_photo_request", "language": "en"})],
            [("Hi {first_name}, I'm sorry your {product} arrived damaged. Please reply with a picture showing the damage and we'll ship your replacement right away. "
              "Your prepaid return label is attached; drop the parcel at any DHL point within 14 days. Thanks for your patience!", "tool_out")]),
        rnd("Checking the customer's loyalty status; some tiers get a goodwill voucher.",
            [("get_customer", {"customer": customer, "fields": ["tier", "orders_12m", "vouchers"]})],
            [(dumps({"tier": r.choice(["silver", "gold"]), "orders_12m": r.randint(2, 9), "vouchers": [], "marketing_opt_in": False}), "tool_out")]),
        rnd("The goodwill rules, before I offer anything extra.",
            [("kb_search", {"query": "goodwill voucher damaged delivery"})],
            [("Goodwill policy: for damaged deliveries, gold customers may receive a 10 EUR voucher in addition to the replacement; silver customers a free "
              "express upgrade. Vouchers cannot be combined with refunds and expire after six months.", "retrieval")]),
        rnd("The escalation rules, in case the customer pushes for a refund after all.",
            [("kb_search", {"query": "refund escalation supervisor"})],
            [("Escalations: if a customer insists on a refund above the agent's authority, create a supervisor task with the order, the amount and a one-line reason. "
              "Supervisors answer within one working day. Never tell the customer a refund is approved before the task is closed.", "retrieval")]),
        rnd("The invoice for the order, in case the customer needs it for the warranty.",
            [("get_invoice", {"order": order, "format": "summary"})],
            [(dumps({"invoice": f"INV-{r.randint(100000, 999999)}", "lines": [{"sku": f"{sku}-{old_code}", "qty": 1}, {"sku": "SHIP-STD", "qty": 1}], "vat_rate": 0.19, "paid_with": "card"}), "tool_out")]),
        rnd("Making sure the prepaid label is attached to the case.",
            [("create_return_label", {"order": order, "carrier": "DHL", "items": 1})],
            [(dumps({"label_pdf": f"https://labels.example/{code(r, n=10)}.pdf", "valid_days": 14, "drop_off": "any DHL point"}), "tool_out")]),
    ])
    return {
        "domain": "customer_support", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 2,
        "followup": sometimes(r, small, (2, [("user", "Also, will I have to pay for sending the broken one back?")])),
        "continuation": [
            f"Now the reply to {customer.split()[0]}.",
            "The customer was clear about wanting a replacement rather than money, and about the variant, so I should confirm that choice explicitly.",
            "The policy I found asks for one thing from the customer before the replacement ships, and that has to be the first request in my message.",
            "I will give the return authorisation exactly as the system returned it, since the customer needs it on the parcel.",
            "My instructions are strict about what I may promise and what I may pay out, so I will only describe the process.",
            "The plan ends with the case log, and the callback digits the customer gave go into it unchanged.",
        ],
        "probes": [
            probe("system", "refund limit", "What is the agent's refund limit?", limit),
            probe("user", "phone number", "What digits does the customer's phone number end in?", phone),
            probe("plan", "case number", "Under which case number does the plan say to log everything?", case),
            probe("tool_in", "replacement sku", "Which replacement SKU did the agent request?", replacement_sku),
            probe("tool_out", "rma", "What RMA did the replacement system return?", rma),
            probe("retrieval", "claim account", "Which claim account does the policy say carrier claims quote?", claim_account),
            probe("scratchpad", "replacement value", "What replacement value did the agent work out?", value),
        ],
    }


# ---- research with retrieval ----------------------------------------------------------------

# (topic, search query, reviewers' field, the result's metric, its test
# conditions, the derived loss, why P2's number is a lab result)
TOPICS = [("sodium-ion batteries for grid storage", "sodium-ion cathode cycle life", "materials science",
           "capacity retention", "after {cycles} cycles at 1C and 25 C in CR2032 half-cells", "capacity loss",
           "it was measured in coin cells, not pouch or prismatic cells"),
          ("heat pumps in cold climates", "air-source heat pump low temperature field study", "building engineering",
           "COP retention", "at -15 C relative to the rated value at 7 C, over {cycles} operating hours", "COP loss",
           "the units ran in a climate chamber, not in occupied homes"),
          ("microplastics in drinking water", "microplastic removal water treatment", "environmental health",
           "removal efficiency", "for particles above 10 micrometres over {cycles} litres of spiked tap water", "removal shortfall",
           "the water was spiked with lab particles, not sampled from a utility"),
          ("perovskite solar cell stability", "perovskite module damp heat stability", "photovoltaics",
           "efficiency retention", "after {cycles} hours of damp heat at 85 C and 85% humidity", "efficiency loss",
           "it was measured on 1 cm2 cells, not on modules")]


def research(r, target):
    small = not big(target)
    topic, query, field, metric, conditions, loss_name, caveat = r.choice(TOPICS)
    year = r.choice(["2019", "2020"])
    words = number(r, 150, 449, "{} words")
    applicant = number(r, 10000, 99999)
    deadline = calendar_day(r)
    min_cites = number(r, 40, 299)
    record = tagged(r, "R-", 6)
    measured = number(r, 751, 999)  # tenths of a percent: 75.1 to 99.9
    result = Drawn(f"{measured.value / 10:.1f}%", measured.space)
    # One-to-one with the drawn result.
    loss = Drawn(f"{100 - measured.value / 10:.1f} points", measured.space)
    cycles = f"{r.choice([1500, 2000, 3000]):,}"
    system = (f"You are a research assistant. The word limit per section is {words}; cite at most three peer-reviewed sources."
              + more(r, small, " Say explicitly how certain each claim is, and quote numbers with the conditions they were measured under."))
    user = [("user", f"I'm writing a grant section on {topic}, applicant number {applicant}. Only results published after {year} please."
                     + more(r, small, f" The reviewers are {field} people and will check every number."))]
    plan = plan_text(["Search well-cited papers.", "Read the strongest result.",
                      f"Extract numbers with their test conditions by the internal deadline of {deadline}."]
                     + ([] if small else ["Keep to the allowed number of citations."]))
    titles = ["A systematic review of long-term performance", "Degradation under realistic operation", "From lab cells to pilot modules",
              "A techno-economic comparison", "An open dataset of field measurements"]
    papers = [{"id": f"P{i + 1}", "title": t, "year": r.randint(int(year) + 1, 2024), "cites": r.randint(min_cites.value + 1, min_cites.value + 400)}
              for i, t in enumerate(titles[:2 if small else 5])]
    papers[1]["record_id"] = record
    section = (f"Results: {metric} was {result} {conditions.format(cycles=cycles)}."
               + more(r, small, f" Under harsher conditions it fell by another {r.randint(9, 18)} points (n = 6 samples, standard deviation 1.4)."))
    rounds = [
        rnd(opt(r, small, "A citation floor keeps the list to established work."),
            [("search_papers", {"query": query, "year_from": int(year) + 1, "minimum_citations": min_cites.value} | ({} if small else {"sort": "citations", "limit": 5}))],
            [(dumps({"results": papers}), "tool_out")]),
        rnd(opt(r, small, "P2 is the most relevant primary study; its results section."),
            [("fetch_section", {"paper": "P2", "section": "results"})], [(section, "retrieval")]),
        rnd(f"P2 has the strongest number, but {caveat}; against 100% that puts the {loss_name} at {loss}.",
            [("check_retractions", {"papers": ["P1", "P2"]})],
            [(dumps({"retracted": [], "checked": "Retraction Watch"}), "tool_out")]),
    ]
    extras = shuffled(r, [
        rnd("The review paper may summarise the spread of results across studies.",
            [("fetch_section", {"paper": "P1", "section": "discussion"})],
            [("Discussion. Across 47 studies the reported values vary by a factor of 2.5, mostly because test protocols differ: temperature, load "
              "and sample format are reported inconsistently. We recommend reporting all of them with every result and publishing raw data.", "retrieval")]),
        rnd("Scale-up evidence, since reviewers will ask about it.",
            [("fetch_section", {"paper": "P3", "section": "abstract"})],
            [("Abstract. We report the first pilot-scale installations built with the same approach. Performance at pilot scale was 8 to 12% lower than in "
              "the laboratory, which we attribute to thermal gradients and unit-to-unit variation; a revised layout recovered half of the gap.", "retrieval")]),
        rnd("Another search with different wording, in case the first missed something.",
            [("search_papers", {"query": query + " mechanisms", "year_from": int(year) + 1, "sort": "relevance", "limit": 3})],
            [(dumps({"results": [{"id": f"Q{i}", "title": t, "year": 2021 + i, "cites": r.randint(5, 30)} for i, t in enumerate(["Mechanisms of performance fade", "In-situ diagnostics during operation", "Materials revisited"])]}), "tool_out")]),
        rnd("The authors of P2, to avoid citing one group repeatedly.",
            [("get_metadata", {"paper": "P2"})],
            [(dumps({"authors": [person(r) for _ in range(4)], "affiliations": ["TU Graz", "CIC energiGUNE"], "venue": "journal", "open_access": True, "funding": "Horizon Europe"}), "tool_out")]),
        rnd("The techno-economic paper might give a cost figure worth one sentence.",
            [("fetch_section", {"paper": "P4", "section": "results"})],
            [("Results. At 2024 material prices the projected cost is 20 to 30% below the incumbent technology, but the advantage disappears "
              "if the service life falls below about two thirds of the design value, because replacement costs then dominate over a 15-year project.", "retrieval")]),
        rnd("A recent preprint might contradict P2; better to know before the reviewers do.",
            [("search_preprints", {"query": query, "posted_after": "2024-06-01", "limit": 3})],
            [(dumps({"results": [{"server": "arXiv", "title": "Re-examining headline performance claims in lab-scale tests", "posted": "2024-11-03", "peer_reviewed": False}]}), "tool_out")]),
        rnd("What the open dataset contains, for the real-world angle.",
            [("fetch_section", {"paper": "P5", "section": "data description"})],
            [("Data description. The dataset covers 312 installations monitored for two to four years at 15-minute resolution, with performance tests every six months. "
              "Field degradation was 1.1 to 2.3% per year, lower than accelerated laboratory tests predict for the same design.", "retrieval")]),
        rnd("How the funder wants references formatted.",
            [("search_docs", {"query": "grant application reference format", "source": "funder-guidelines"})],
            [("Guidelines for applicants, section 6: references use author-year style with DOIs. Preprints may be cited but must be marked as not peer reviewed. "
              "The state-of-the-art section should not exceed one page including references.", "retrieval")]),
        rnd("Citation trend for P2, to gauge how the community received it.",
            [("get_citations", {"paper": "P2", "by": "year"})],
            [(dumps({"by_year": {str(y): r.randint(91, 250) for y in range(2021, 2026)}, "self_citations": r.randint(3, 12)}), "tool_out")]),
    ])
    return {
        "domain": "research", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 2,
        "followup": sometimes(r, small, (2, [("user", "If there is real-world data, not only lab data, please mention it, reviewers love that.")])),
        "continuation": [
            "Drafting the paragraph now.",
            "The period the user asked for and the citation floor I used in the search both hold for every paper I plan to cite.",
            "The headline number comes from the results section I read, and a number must travel with its test conditions, so I will give them in the same sentence.",
            "My own note on how far that number is from perfect, and why it is a lab result, is the main caveat, and I will state it as a limitation rather than hide it.",
            "For the citation I will use the identifier from the search results, not the title, to avoid ambiguity.",
            "The length rule in my instructions and the date in the plan both limit how much I can add, so at least one paper has to be dropped.",
        ],
        "probes": [
            probe("system", "word limit", "What word limit per section does the assistant have?", words),
            probe("user", "applicant number", "What is the user's applicant number?", applicant),
            probe("plan", "internal deadline", "What internal deadline does the plan set?", deadline),
            probe("tool_in", "minimum citations", "What minimum citations value did the agent set in its search?", min_cites),
            probe("tool_out", "record id", "What record id did the search return for paper P2?", record),
            probe("retrieval", metric, f"What {metric} does P2's results section report?", result),
            probe("scratchpad", loss_name, f"What {loss_name} did the agent derive from P2's result?", loss),
        ],
    }


# ---- DevOps incident -------------------------------------------------------------------------

def devops_incident(r, target):
    small = not big(target)
    company = r.choice(["Parcelhub", "Quanto Pay", "Leafline", "Orbit Retail"])
    lead_in = r.randint(5, 20)
    # The log query starts lead_in minutes before the reported start; every
    # start keeps the timeline's times inside the day.
    since = clock(r, 30, 23 * 60 - 21)
    minute = since.value + lead_in
    start = f"{minute // 60:02d}:{minute % 60:02d}"

    def at(offset):
        return f"{(minute + offset) // 60:02d}:{(minute + offset) % 60:02d}"

    restarts = r.choice([6, 7, 8, 9])
    minor = r.randint(30, 60)
    pod = f"checkout-api-{code(r, 'abcdefghijklmnopqrstuvwxyz0123456789', 5)}"
    lead = r.choice(["seven", "four", "eleven"])
    escalate = r.choice([20, 30, 45])
    region = r.choice(["eu-west-1", "eu-central-1", "us-east-2"])
    escalation = tagged(r, "OPS-")
    commander = full_name(r)
    war_room = tagged(r, "inc-")
    request = tagged(r, "req-", 5)
    template = tagged(r, "CT-")
    failed = number(r, 200, 2999)
    system = (f"You are the on-call SRE assistant at {company}. If an incident is not mitigated within {escalate} minutes, "
              f"page on-call with escalation code {escalation}."
              + more(r, small, " Never restart the primary database, and open a change ticket for every production change."))
    user = [("user", f"Incident commander {commander} here. Checkout in {region} returns 502s since {start} UTC. Can you dig in?"
                     + more(r, small, " The status page is still green and support is getting tickets from merchants already."))]
    plan = plan_text(["Read the checkout-api logs.", "Compare with recent deploys.", f"Mitigate minimally; post every step in war room {war_room}."]
                     if small else ["Confirm the impact from metrics.", "Read the checkout-api error logs.", "Compare with recent deploys.",
                                    f"Mitigate with the smallest safe change and post every step in war room {war_room}.", "Write the timeline."])
    logs = (f"{at(-1)}:12Z {pod} OOMKilled (exit 137)\n{at(1)}:40Z ingress status=502 request_id={request}\n"
            f"{at(3)}:03Z back-off restarting; restart count {restarts}"
            if small else
            f"{at(-1)}:12Z kubelet  {pod} container checkout-api OOMKilled (exit code 137)\n"
            f"{at(1)}:40Z ingress  upstream prematurely closed connection while reading response header, status=502, request_id={request}\n"
            f"{at(3)}:03Z kubelet  {pod} back-off restarting failed container; restart count {restarts}")
    runbook = (f"RB-112: if checkout-api is OOMKilled after a deploy, roll back with deployctl rollback under change template {template} "
               "instead of raising memory limits."
               + more(r, small, " Raising limits requires a capacity review by the platform team and is not an incident mitigation."))
    rounds = [
        rnd("Logs first, from a little before the report.",
            [("query_logs", {"service": "checkout-api", "from_time": since, "level": "error"})], [(logs, "tool_out")]),
        rnd(opt(r, small, "OOM kills on checkout-api; the runbook probably covers this."),
            [("runbook_search", {"query": "checkout-api OOMKilled"})], [(runbook, "retrieval")]),
        rnd(f"The last deploy went out {lead} minutes before the first errors, the prime suspect; my estimate of failed checkouts so far is {failed}.",
            [("list_deploys", {"service": "checkout-api", "limit": 2})],
            [(dumps({"deploys": [f"v2.{minor}.{k}" for k in (1, 0)]}), "tool_out")]),
    ]
    first = [rnd("Confirming the impact from the error rate before anything else.",
                 [("get_metrics", {"service": "checkout-api", "metric": "http_5xx_ratio", "region": region, "window": "90m", "step": "15m"})],
                 [(dumps({"series": [0.002, 0.001, 0.003, round(r.uniform(0.08, 0.2), 3), round(r.uniform(0.15, 0.3), 3), round(r.uniform(0.2, 0.35), 3)], "unit": "ratio"}), "tool_out")])]
    extras = first + shuffled(r, [
        rnd("Is the database involved at all? Its CPU would show it.",
            [("get_metrics", {"service": "orders-db-primary", "metric": "cpu_utilisation", "region": region, "window": "90m", "step": "15m"})],
            [(dumps({"series": [round(r.uniform(0.3, 0.45), 2) for _ in range(6)], "unit": "ratio", "replication_lag_s": round(r.uniform(0.1, 0.9), 1)}), "tool_out")]),
        rnd("Memory of the checkout pods over the same window.",
            [("get_metrics", {"service": "checkout-api", "metric": "container_memory_working_set_bytes", "region": region, "window": "90m", "step": "15m"})],
            [(dumps({"series_mib": [r.randint(380, 420), r.randint(380, 420), r.randint(600, 700), r.randint(900, 1000), 1024, 1024], "limit_mib": 1024}), "tool_out")]),
        rnd("Other regions, to size the blast radius.",
            [("get_metrics", {"service": "checkout-api", "metric": "http_5xx_ratio", "region": "all", "window": "30m", "step": "30m"})],
            [(dumps({"by_region": {"eu-west-1": round(r.uniform(0, 0.3), 3), "eu-central-1": round(r.uniform(0, 0.3), 3), "us-east-2": 0.001, "ap-southeast-1": 0.002}}), "tool_out")]),
        rnd("Feature flags change behaviour without a deploy; checking those too.",
            [("list_flag_changes", {"service": "checkout-api", "window": "3h"})],
            [(dumps({"changes": [{"flag": "new-tax-engine", "to": "10%", "by": "release-bot"}, {"flag": "cart-recommendations", "to": "off", "by": "m.keller"}]}), "tool_out")]),
        rnd("The emergency change procedure, because the rollback is a production change.",
            [("runbook_search", {"query": "emergency change ticket rollback"})],
            [("RB-004 Emergency changes. For a rollback during an incident, open the change with chg new --type emergency and link the incident; approval is "
              "retroactive within 24 hours. Post the ticket id in the incident channel before running the rollback, and again when it has finished.", "retrieval")]),
        rnd("Node pressure, in case it is the cluster and not the application.",
            [("kubectl", {"args": ["top", "nodes", "-l", "pool=checkout"], "context": region})],
            [("NAME            CPU(cores)   CPU%   MEMORY(bytes)   MEMORY%\nnode-ck-a1      1130m        28%    9870Mi          61%\nnode-ck-a2      1320m        33%    10412Mi         64%\nnode-ck-a3      990m         24%    9120Mi          57%", "tool_out")]),
        rnd("Alerts that fired without paging anyone.",
            [("get_alerts", {"service": "checkout-api", "state": "firing"})],
            [(dumps({"alerts": [{"name": "CheckoutLatencyP99High", "severity": "warning", "for": "12m"}, {"name": "PodRestartsHigh", "severity": "warning", "for": "9m"}, {"name": "IngressUpstreamErrors", "severity": "warning", "for": "8m"}]}), "tool_out")]),
        rnd("The diff of the suspect release, to see what could allocate more memory.",
            [("get_release_notes", {"service": "checkout-api", "version": "latest"})],
            [("Release notes: moved price rounding into the tax engine; added an in-memory cache for promotion rules (unbounded, to be capped in the next release); "
              "upgraded the JSON library; removed the legacy coupon endpoint.", "tool_out")]),
        rnd("How incident timelines are written here, so mine fits the template.",
            [("runbook_search", {"query": "incident timeline format"})],
            [("Incident handbook 2.2: the timeline lists detection, first customer report, mitigation start, mitigation end and all-clear, in UTC, each with the "
              "evidence that supports it. Suspected causes are labelled as suspected until the postmortem confirms them.", "retrieval")]),
    ])
    return {
        "domain": "devops", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 0,
        "followup": sometimes(r, small, (2, [("user", "Finance says every minute costs real money, what's the fastest safe fix?")])),
        "continuation": [
            "Deciding on the mitigation now.",
            "The runbook is explicit about which action is allowed during an incident and how to file it, so I will follow it rather than raise the limits.",
            "For the timeline I will use the start time the user reported, the window my log query covered and the restart count from the logs, quoted exactly.",
            "My note on the deploy timing goes into the timeline as the suspected cause, marked as not yet confirmed, together with my estimate of the impact.",
            "I also have to watch the clock: the escalation rule in my instructions runs from the moment the incident was reported.",
            "The plan asks for a minimal mitigation, which the rollback is, and every step goes to the room the plan named.",
        ],
        "probes": [
            probe("system", "escalation code", "Which escalation code must the agent use to page the human on-call?", escalation),
            probe("user", "incident commander", "Who is the incident commander?", commander),
            probe("plan", "war room", "In which war room does the plan say to post every step?", war_room),
            probe("tool_in", "from time", "What from_time did the agent pass to the log query?", since),
            probe("tool_out", "request id", "What request id did the ingress log show for the 502?", request),
            probe("retrieval", "change template", "Which change template does the runbook prescribe for the rollback?", template),
            probe("scratchpad", "failed checkouts", "How many failed checkouts so far did the agent estimate?", failed),
        ],
    }


# ---- shopping -----------------------------------------------------------------------------------

def shopping(r, target):
    small = not big(target)
    store = r.choice(["ElektroMax", "HomeHaus", "Voltaire Appliances"])
    niche = r.choice([60, 62])
    capacity = r.choice([9, 10])
    stock = r.choice([11, 12, 13, 14, 15, 17])
    min_reviews = number(r, 100, 999, "{} reviews")
    card = number(r, 100000, 999999)
    pickup_date = calendar_day(r)
    price_limit = number(r, 700, 999)
    pickup_code = Drawn(f"{code(r, n=3)}-{r.randint(1000, 9999)}", 32 ** 3 * 9000)
    clearance = number(r, 20, 250, "{} mm")
    diff = number(r, 30, 269, "{} EUR")
    low = r.randint(349, price_limit.value - 1 - diff.value)
    prices = r.sample([low, low + diff.value], 2)
    models = [{"sku": f"WM-{code(r, '0123456789', 5)}", "brand": b, "price": prices[k] if k < 2 else r.randint(349, price_limit.value - 1)}
              | ({} if small else {"kg": capacity + k % 2, "width_cm": 59.5 + 0.2 * (k % 2), "rating": round(r.uniform(4.3, 4.9), 1)})
              for k, b in enumerate(r.sample(["Bosch", "Miele", "Samsung", "AEG", "Siemens", "Beko"], 2 if small else 4))]
    system = (f"You are the shopping assistant of {store}. Marketplace sellers need a minimum review count of {min_reviews}."
              + more(r, small, " Only recommend items in stock at the customer's store or deliverable within five days, "
                                  "and mention running costs when two prices are close."))
    user = [("user", f"Our washing machine died. The new one must fit a {niche} cm niche; we're five people. "
                     f"Pickup in Dortmund, card number {card}."
                     + more(r, small, " We'd like to collect it this week if possible."))]
    plan = plan_text(["Search machines that fit.", "Check installation and stock.", f"Recommend one with the runner-up; target pickup date {pickup_date}."]
                     if small else ["Search machines that fit the niche and the load.", "Read the installation requirements.",
                                    f"Reserve at the pickup store for the target pickup date of {pickup_date}.", "Recommend one, with the runner-up and the trade-off."])
    manual = (f"Installation: keep a rear clearance of at least {clearance} to the wall."
              + more(r, small, " The floor must be level within 2 mm; connect to a separate 16 A circuit and remove the transit bolts before first use."))
    dearer = "dearer" if models[1]["price"] > models[0]["price"] else "cheaper"
    rounds = [
        rnd(opt(r, small, "Searching with a little margin on the width."),
            [("search_products", {"category": "washing_machines", "max_width_cm": 59.8, "price_limit_eur": price_limit.value}
              | ({} if small else {"min_kg": capacity - 1, "sort": "rating", "limit": 4}))],
            [(dumps({"products": models}), "tool_out")]),
        rnd(opt(r, small, f"{models[0]['brand']} first: the installation requirements."),
            [("get_manual", {"sku": models[0]["sku"], "section": "installation"})], [(manual, "retrieval")]),
        rnd(f"The {models[1]['brand']} is {dearer} than the {models[0]['brand']}; a price difference of {diff} makes running costs matter.",
            [("reserve_for_pickup", {"sku": models[0]["sku"], "store": "Dortmund"})],
            [(dumps(({} if small else {"status": "reserved"}) | {"in_store": stock, "pickup_code": pickup_code}), "tool_out")]),
    ]
    extras = shuffled(r, [
        rnd("Energy and water data for both, since the prices are close.",
            [("get_specs", {"skus": [m["sku"] for m in models[:2]], "fields": ["energy_class", "kwh_per_100_cycles", "water_l_per_cycle", "noise_db"]})],
            [(dumps({m["sku"]: {"energy_class": r.choice(["A", "B"]), "kwh_per_100_cycles": r.randint(48, 62), "water_l_per_cycle": r.randint(44, 52), "noise_db": r.randint(70, 76)} for m in models[:2]}), "tool_out")]),
        rnd("Owner reviews say more about reliability than the spec sheet.",
            [("get_reviews", {"sku": models[0]["sku"], "sort": "most_helpful", "limit": 3})],
            [("Most helpful reviews: \"Quiet on the spin cycle, and the big drum really takes a family load.\" \"The door seal collects water, wipe it after each wash.\" "
              "\"Delivery took ten minutes to install; the app is pointless but the machine is great.\"", "retrieval")]),
        rnd("Marketplace offers might be cheaper, but the seller rule applies.",
            [("search_offers", {"sku": models[1]["sku"], "include_marketplace": True})],
            [(dumps({"offers": [{"seller": s, "price": models[1]["price"] - r.randint(10, 60), "seller_rating": round(r.uniform(3.6, 4.9), 1), "ships_in_days": r.randint(2, 9)} for s in ["WaschWelt24", "ApplianceDirect", "HausTechnik"]]}), "tool_out")]),
        rnd("What happens to the old machine?",
            [("kb_search", {"query": "old appliance take-back"})],
            [("Take-back service: when you buy a new large appliance we take the old one back free of charge at delivery. For store pickups, bring the old "
              "appliance to the service counter within 30 days with the receipt; we also collect it at home for 25 EUR.", "retrieval")]),
        rnd("Depth matters as much as width for a niche.",
            [("get_specs", {"skus": [m["sku"] for m in models], "fields": ["depth_cm", "height_cm", "door_opening_cm"]})],
            [(dumps({m["sku"]: {"depth_cm": round(r.uniform(54.0, 58.9), 1), "height_cm": 84.5, "door_opening_cm": r.choice([32, 34])} for m in models}), "tool_out")]),
        rnd("Warranty options, since a family machine runs almost daily.",
            [("get_warranty_options", {"sku": models[0]["sku"]})],
            [(dumps({"included_years": 2, "extensions": [{"years": 5, "price": 79}, {"years": 3, "price": 49}], "covers": ["parts", "labour", "call-out"]}), "tool_out")]),
        rnd("Running costs depend on the local electricity price; the store's guide has one.",
            [("kb_search", {"query": "running cost calculation washing machine"})],
            [("Buying guide: we estimate running costs with EUR 0.32 per kWh and EUR 4.50 per cubic metre of water, assuming 220 wash cycles a year for a "
              "family household. Over ten years an efficient machine typically saves 150 to 300 EUR compared with a class C model.", "retrieval")]),
        rnd("Delivery instead of pickup, in case the user prefers it.",
            [("get_delivery_options", {"sku": models[0]["sku"], "postcode": "44135"})],
            [(dumps({"options": [{"type": "standard", "days": 3, "price": 39}, {"type": "with installation", "days": 4, "price": 79}], "old_appliance_collection": 25}), "tool_out")]),
    ])
    return {
        "domain": "shopping", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 2,
        "followup": sometimes(r, small, (2, [("user", "Can you take the old one away when we collect the new machine?")])),
        "continuation": [
            "Putting the recommendation together.",
            "Both machines fit the width the user gave, but the installation section asks for space at the back, so the depth of the niche matters as well and I should say so.",
            "The drum size follows from the size of the household the user mentioned, and the user's store account goes on the reservation.",
            "The reservation answered the question for the store the user named, and I will quote its code exactly, with the day the plan aims for.",
            "My own comparison found the two prices close, which is why running costs belong in the answer.",
            "Marketplace offers only count if the seller clears the bar in my instructions, and the search stayed under the limit I set.",
        ],
        "probes": [
            probe("system", "minimum review count", "What minimum review count do marketplace sellers need?", min_reviews),
            probe("user", "card number", "What is the customer's card number?", card),
            probe("plan", "target pickup date", "What target pickup date does the plan set?", pickup_date),
            probe("tool_in", "price limit eur", "What price_limit_eur did the agent pass to the product search?", price_limit),
            probe("tool_out", "pickup code", "What pickup code did the reservation return?", pickup_code),
            probe("retrieval", "rear clearance", "What rear clearance does the manual require?", clearance),
            probe("scratchpad", "price difference", "What price difference did the agent compute between the two machines?", diff),
        ],
    }


# ---- scheduling -----------------------------------------------------------------------------

SUMMER_TIME = (datetime.date(YEAR, 3, 30), datetime.date(YEAR, 10, 26))  # central European summer time


def scheduling(r, target):
    small = not big(target)
    team = r.choice(["the platform design team", "the mobile squad", "the data products group"])
    duration = r.choice([45, 50, 60])
    booking_date = calendar_day(r, weekdays_only=True)
    weekday = WEEKDAYS[booking_date.value.weekday()]
    time = r.choice(["09:30", "10:00", "10:30"])
    slot = f"{weekday} {time}"
    others = [s for s in ["Monday 10:00", "Tuesday 10:30", "Tuesday 11:00", "Thursday 10:30", "Friday 15:00"] if s != slot]
    slots = [slot] + r.sample(others, 2 if small else 3)
    r.shuffle(slots)
    summer = SUMMER_TIME[0] <= booking_date.value < SUMMER_TIME[1]
    europe = "+02:00" if summer else "+01:00"
    minute = int(time[:2]) * 60 + int(time[3:]) + (210 if summer else 270)
    bangalore = f"{minute // 60:02d}:{minute % 60:02d}"
    user_busy = r.choice([busy for busy in ["Wednesday morning", "Monday afternoon", "Friday afternoon"] if busy != f"{weekday} morning"])
    pin = number(r, 100000, 999999)
    badge = number(r, 10000, 99999)
    project = tagged(r, "ONB-")
    request = tagged(r, "cal-")
    event_id = letters(r, "evt_", "abcdefghijkmnopqrstuvwxyz23456789", 6)
    facilitator = full_name(r)
    lead_hours = r.choice([24, 48])
    colleague = r.choice(["Tomás", "Ingrid", "Yusuf", "Keiko"])
    system = (f"You are the scheduling assistant of {team}. Never book anything between 12:00 and 13:00 local time for any attendee. "
              f"Meetings use bridge PIN {pin}."
              + more(r, small, " Every invite needs an agenda; work in each attendee's own time zone."))
    user = [("user", f"Please set up a design review with Priya, {colleague} and me next week. Priya is in Bangalore. I'm on a train {user_busy}. "
                     f"My badge number is {badge}."
                     + more(r, small, " It's about the new onboarding flow, so bring the latest designs."))]
    plan = plan_text(["Find common free slots.", "Check the design review rules on the wiki.", f"Book the slot on project code {project} and send the invite."]
                     if small else ["Get everyone's time zone.", "Ask the calendar for common free slots.", "Check the design review rules on the wiki.",
                                    f"Book the best slot on project code {project} and send the invite with the agenda."])
    rounds = [
        rnd(opt(r, small, "Now the common free slots for the three of them."),
            [("find_slots", {"attendees": ["priya", colleague.lower(), "me"], "minutes": duration} | ({} if small else {"range": "next_week", "working_hours_only": True}))],
            [(dumps({"berlin_time": slots}), "tool_out")]),
        rnd(opt(r, small, "The wiki has rules for design reviews."),
            [("search_wiki", {"query": "design review checklist"})],
            [(f"Design review checklist: share the Figma link at least {lead_hours} hours ahead; this quarter's review facilitator is {facilitator}."
              + more(r, small, " Invite one note-taker from outside the team; reviews without a written goal in the agenda are declined."), "retrieval")]),
        rnd(f"{slot} in Berlin is {bangalore} in Bangalore, clear of lunch and the train; that makes the booking date {booking_date}.",
            [("create_event", {"title": "Design review", "start": slot, "minutes": duration, "request_id": request}
              | ({} if small else {"attendees": ["priya", colleague.lower(), "me"], "agenda": "Goal: decide the new onboarding steps."}))],
            [(dumps({"event_id": event_id, "status": "tentative"}), "tool_out")]),
    ]
    first = [rnd("Time zones first.", [("get_timezones", {"people": ["priya", colleague.lower(), "me"]})],
                 [(dumps({"priya": "Asia/Kolkata (UTC+05:30)", colleague.lower(): f"Europe/Madrid (UTC{europe})", "me": f"Europe/Berlin (UTC{europe})"}), "tool_out")])]
    extras = first + shuffled(r, [
        rnd("Who could take notes from outside the team, as the checklist asks?",
            [("search_people", {"team": "research ops", "available": "next_week"})],
            [(dumps({"people": [{"name": person(r), "team": "research ops", "free_slots": r.randint(2, 8)} for _ in range(3)]}), "tool_out")]),
        rnd("A room for the people in the Berlin office.",
            [("find_rooms", {"site": "Berlin", "capacity": 4, "equipment": ["screen", "camera"], "range": "next_week"})],
            [(dumps({"rooms": [{"name": n, "capacity": c, "floor": f} for n, c, f in [("Spree", 6, 3), ("Tempelhof", 4, 2), ("Wannsee", 8, 5)]]}), "tool_out")]),
        rnd("Public holidays next week in the three countries.",
            [("get_holidays", {"countries": ["IN", "ES", "DE"], "range": "next_week"})],
            [(dumps({"IN": [], "ES": [{"day": "Friday", "name": "regional holiday (some regions)"}], "DE": []}), "tool_out")]),
        rnd("Priya's working hours, to be safe.",
            [("get_working_hours", {"person": "priya"})],
            [(dumps({"start": "09:30", "end": "18:30", "timezone": "Asia/Kolkata", "focus_blocks": ["Wednesday 10:00-12:00"], "out_of_office": []}), "tool_out")]),
        rnd("The Figma file for the agenda.",
            [("search_files", {"query": "onboarding flow", "type": "figma"})],
            [(dumps({"files": [{"name": "Onboarding flow v3", "updated": "2 days ago", "owner": colleague, "url": "https://figma.example/file/ONB3"}, {"name": "Onboarding flow v2 (archived)", "updated": "3 months ago"}]}), "tool_out")]),
        rnd("The handbook has guidance on meetings across time zones.",
            [("search_wiki", {"query": "meetings across time zones", "space": "HANDBOOK"})],
            [("Handbook 7.1: rotate inconvenient meeting times between locations; record every cross-time-zone meeting and share the recording within a day; "
              "avoid Friday afternoons in Europe for decisions that need follow-up, and never schedule over a public holiday in any attendee's location.", "retrieval")]),
        rnd("How the team usually structures design reviews.",
            [("search_wiki", {"query": "design review agenda template", "space": "DESIGN"})],
            [("Agenda template: 1) goal and decision needed (5 minutes), 2) walkthrough by the designer (15 minutes), 3) questions from engineering and research, "
              "4) decisions and owners. Keep a parking lot for topics that need a separate session.", "retrieval")]),
        rnd("The recording policy, since one attendee is far away and may want to rewatch parts.",
            [("search_wiki", {"query": "meeting recording consent policy", "space": "HANDBOOK"})],
            [("Handbook 7.3: recordings need the consent of every attendee, asked at the start of the meeting. Recordings are kept for 90 days in the team "
              "drive and deleted automatically afterwards; design reviews may be recorded, interviews with customers may not.", "retrieval")]),
        rnd("Earlier design reviews of this flow, to link the notes in the agenda.",
            [("search_events", {"query": "design review onboarding", "range": "last_90_days"})],
            [(dumps({"events": [{"title": "Design review: onboarding v2", "date": "9 weeks ago", "notes": "https://docs.example/notes/onb-v2", "decisions": 3}, {"title": "Onboarding research readout", "date": "5 weeks ago", "notes": "https://docs.example/notes/onb-research"}]}), "tool_out")]),
        rnd("A backup slot in case someone declines; asking the calendar for one more option.",
            [("find_slots", {"attendees": ["priya", colleague.lower(), "me"], "minutes": duration, "range": "week_after", "working_hours_only": True, "limit": 2})],
            [(dumps({"berlin_time": ["Tuesday 10:00 (week after)", "Wednesday 11:30 (week after)"], "conflicts_ignored": 0}), "tool_out")]),
        rnd(f"{colleague}'s calendar load next week, so the review does not land on an overloaded day.",
            [("get_calendar_load", {"person": colleague.lower(), "range": "next_week"})],
            [(dumps({"meeting_hours_by_day": {"Mon": r.randint(1, 6), "Tue": r.randint(1, 6), "Wed": r.randint(1, 6), "Thu": r.randint(1, 6), "Fri": r.randint(0, 3)}}), "tool_out")]),
    ])
    return {
        "domain": "scheduling", "system": system, "user": user, "plan": plan, "rounds": rounds,
        "extras": extras, "extras_at": 0,
        "followup": sometimes(r, small, (2, [("user", "If research ops has someone free, could they take notes? We never manage to write things down.")])),
        "continuation": [
            "Now the message to the user and the invite text.",
            "The slot I booked avoids the time the user said they are travelling, and my conversion for Priya keeps it outside the blocked hour from my instructions.",
            "The wiki rule sets a deadline for sharing the design file, so the invite has to say by when the link goes out, and who runs the review.",
            "I will quote the calendar's identifier for the booking exactly as it was returned, in case the user wants to change it.",
            "The invite also needs the dial-in details from my instructions, the calendar day I worked out and the code the plan books it on.",
            "The meeting length is the one I asked the calendar for.",
        ],
        "probes": [
            probe("system", "bridge pin", "What bridge PIN do the team's meetings use?", pin),
            probe("user", "badge number", "What is the user's badge number?", badge),
            probe("plan", "project code", "Which project code does the plan say to book the slot on?", project),
            probe("tool_in", "request id", "What request id did the agent send with the booking?", request),
            probe("tool_out", "event id", "What event id did the calendar return?", event_id),
            probe("retrieval", "review facilitator", "Who is this quarter's review facilitator?", facilitator),
            probe("scratchpad", "booking date", "What booking date did the agent work out for the review?", booking_date),
        ],
    }


ALL = [travel, code_debugging, data_analysis, customer_support, research, devops_incident, shopping, scheduling]

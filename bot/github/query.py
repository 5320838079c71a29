"""The text of every GraphQL query the bot sends (queries only, never a mutation)."""

from __future__ import annotations

PAGE = 100  # GitHub's largest page of any connection
PULL_BATCH = 50  # pull requests per aliased query (named pull requests, their comments)
ALIAS_BATCH = 20  # pull requests or branches per aliased query (context pages, isRequired, refs)
RATE = "rateLimit { cost remaining resetAt }"


# A pull request's place in its base branch's merge queue (objects, not connections: no cost).
QUEUE_ENTRY = (
    "isInMergeQueue mergeQueueEntry { state position enqueuedAt"
    " headCommit { oid } baseCommit { oid } }"
)
# A merge queue's configuration: how long it waits for a check to report.
QUEUE_CONFIG = "configuration { checkResponseTimeout }"

RULES = (
    "refUpdateRule { pattern requiredStatusCheckContexts }\n"
    f"    rules(first: {PAGE}) {{ pageInfo {{ hasNextPage }} nodes {{ type"
    " repositoryRuleset { name enforcement }\n"
    "      parameters { ... on RequiredStatusChecksParameters {"
    " requiredStatusChecks { context integrationId } } } } }"
)


def context_nodes(*, required_for: str | None = None) -> str:
    """The selection of one rollup context; `required_for` a variable naming the pull request.

    `isRequired` is asked only with a pull request number: without one it passes validation
    but GitHub rejects it at run time.
    """
    required = f" isRequired(pullRequestNumber: {required_for})" if required_for else ""
    return (
        "nodes { __typename\n"
        "  ... on CheckRun { id name status conclusion startedAt completedAt detailsUrl databaseId"
        f" title summary{required}\n"
        "    checkSuite { app { databaseId slug }"
        " workflowRun { event file { path } workflow { name } } } }\n"
        f"  ... on StatusContext {{ context state description targetUrl createdAt{required} }}\n"
        "}"
    )


def _contexts(*, after: str | None = None, required_for: str | None = None) -> str:
    cursor = f", after: {after}" if after else ""
    return (
        f"contexts(first: {PAGE}{cursor}) {{ totalCount pageInfo {{ hasNextPage endCursor }}\n"
        f"  {context_nodes(required_for=required_for)} }}"
    )


def _pull_fields(
    *, with_labels: bool, required_for: str | None = None, with_comments: bool = False
) -> str:
    labels = (
        f"labels(first: {PAGE}) {{ pageInfo {{ hasNextPage endCursor }} nodes {{ name }} }}"
        if with_labels
        else ""
    )
    comments = (
        f"comments(first: {PAGE_COMMENTS}) {{ totalCount pageInfo {{ hasNextPage endCursor }}"
        f" nodes {{ {COMMENT_FIELDS} }} }}\n"
        if with_comments
        else ""
    )
    return (
        "number title url isDraft headRefOid baseRefName author { __typename login }\n"
        f"{labels}\n{comments}{QUEUE_ENTRY}\n"
        f"statusCheckRollup {{ {_contexts(required_for=required_for)} }}"
    )


# The first comments of each pull request read with its page (a run with no state finds its
# own comment there: no second pass; one with more comments before it pages on from there).
PAGE_COMMENTS = 10


def one_point_page(connections: int) -> int:
    """The most pull requests a page may hold for one GraphQL point with `connections` per pull
    request: GitHub counts one request per connection per node and charges requests / 100
    rounded to the nearest whole point (100 with the rollup alone; 74 with the comments too)."""
    return min(PAGE, 148 // max(1, connections))


# A branch's newest commit (an object: no point). Its base branch's commit is what a head's
# merge base is a fact of (bot.github.bases): read with the listing, not a query of its own.
TIP = "name target { oid }"


def tips_selection(count: int) -> str:
    """`tips`: the repository's default branch and `count` branches (`$t<i>`, qualified
    names) with their newest commit, beside a query's own repository (no point)."""
    refs = "".join(f" t{i}: ref(qualifiedName: $t{i}) {{ {TIP} }}" for i in range(count))
    return (
        f"  tips: repository(owner: $owner, name: $name) {{ defaultBranchRef {{ {TIP} }}{refs} }}\n"
    )


def _tips_params(count: int) -> str:
    return "".join(f", $t{i}: String!" for i in range(count))


def pulls_page_query(
    *, with_labels: bool, with_comments: bool = False, tips: int | None = None
) -> str:
    """The query that reads one page of open pull requests with their head's rollup (and, with
    `with_comments`, each one's first comments; with `tips`, the base branches' newest commits:
    the default branch's and `tips` others')."""
    fields = _pull_fields(with_labels=with_labels, with_comments=with_comments)
    return (
        "query PullPage($owner: String!, $name: String!, $first: Int!, $after: String"
        f"{_tips_params(tips or 0)}) {{\n"
        f"  {RATE}\n"
        f"{'' if tips is None else tips_selection(tips)}"
        "  repository(owner: $owner, name: $name) {\n"
        "    pullRequests(states: OPEN, first: $first, after: $after,"
        " orderBy: {field: CREATED_AT, direction: ASC}) {\n"
        "      pageInfo { hasNextPage endCursor }\n"
        f"      nodes {{ {fields} }}\n"
        "    }\n  }\n}\n"
    )


def pulls_by_number_query(numbers: list[int], *, with_labels: bool, tips: int | None = None) -> str:
    """One query reading several pull requests by number (aliases pN), each with its rollup
    (with `tips`, the base branches' newest commits as `pulls_page_query` reads them)."""
    aliases = "\n".join(
        f"    p{int(n)}: pullRequest(number: {int(n)}) {{ state\n"
        f"      {_pull_fields(with_labels=with_labels)} }}"
        for n in numbers
    )
    return (
        f"query PullsByNumber($owner: String!, $name: String!{_tips_params(tips or 0)}) {{\n"
        f"  {RATE}\n"
        f"{'' if tips is None else tips_selection(tips)}"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


def pull_query(*, with_labels: bool) -> str:
    """The query that reads one pull request with its head's rollup and what is required
    (each context's isRequired, and the base branch's protection and rulesets)."""
    return (
        "query OnePull($owner: String!, $name: String!, $number: Int!) {\n"
        f"  {RATE}\n"
        "  repository(owner: $owner, name: $name) {\n"
        f"    pullRequest(number: $number) {{\n"
        f"      {_pull_fields(with_labels=with_labels, required_for='$number')}\n"
        f"      baseRef {{ {TIP} {RULES} }} }}\n"
        "  }\n}\n"
    )


def more_contexts_query(count: int, *, required: bool = False) -> str:
    """The next page of contexts of `count` head commits (`$o<i>`, `$c<i>`) at once.

    Pages are read by the commit's id, never by pull-request number: a head that moves between
    two reads cannot mix two commits' contexts into one report. With `required` (`$n<i>` the
    pull request), each context says whether it is required for its pull request: this is also
    how required-ness is learned.
    """
    number = ", $n{i}: Int!" if required else ""
    params = ", ".join(
        f"$o{i}: GitObjectID!, $c{i}: String{number.format(i=i)}" for i in range(count)
    )
    aliases = "\n".join(
        f"    p{i}: object(oid: $o{i}) {{ ... on Commit {{ statusCheckRollup {{"
        f" {_contexts(after=f'$c{i}', required_for=f'$n{i}' if required else None)} }} }} }}"
        for i in range(count)
    )
    name = "LearnRequired" if required else "MoreContexts"
    return (
        f"query {name}($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


def required_sets_query(count: int) -> str:
    """What `count` base branches (`$b<i>`, qualified names) require, in one query: the branch
    protection viewable by non-admins and the rules of active rulesets."""
    params = ", ".join(f"$b{i}: String!" for i in range(count))
    aliases = "\n".join(
        f"    b{i}: ref(qualifiedName: $b{i}) {{ name {RULES} }}" for i in range(count)
    )
    return (
        f"query RequiredChecks($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


MORE_LABELS_QUERY = f"""
query MoreLabels($owner: String!, $name: String!, $number: Int!, $after: String) {{
  {RATE}
  repository(owner: $owner, name: $name) {{
    pullRequest(number: $number) {{
      labels(first: {PAGE}, after: $after) {{
        pageInfo {{ hasNextPage endCursor }} nodes {{ name }}
      }}
    }}
  }}
}}
"""

# What tells the bot's own comment and whether someone else edited it last: `editor` is who
# made the last edit (GitHub's schema: `lastEditedAt` is "the moment the editor made the last
# edit"). Listings read no more: `userContentEdits` is a connection nested in every comment,
# which would make a listing of 50 pull requests' comments cost 101 points instead of 1.
COMMENT_FIELDS = (
    "id databaseId body createdAt lastEditedAt author { __typename login }"
    " editor { __typename login }"
)
# A comment re-read by id also says who made its newest edit, whoever `editor` names: both ends
# of `userContentEdits` (GitHub does not document its order; the later `editedAt` is the last
# edit), a page of one each per comment, no extra point on a nodes(ids:) read.
_EDIT = "nodes { editedAt editor { __typename login } }"
LAST_EDIT = (
    f"firstEdit: userContentEdits(first: 1) {{ {_EDIT} }}"
    f" lastEdit: userContentEdits(last: 1) {{ {_EDIT} }}"
)

COMMENTS_QUERY = f"""
query Comments($ids: [ID!]!) {{
  {RATE}
  nodes(ids: $ids) {{
    __typename
    ... on IssueComment {{ {COMMENT_FIELDS} {LAST_EDIT} }}
  }}
}}
"""

# A check run's annotations read per run (its first page: failure-level ones are kept). GitHub
# has no level filter on CheckRun.annotations: a run whose first page holds fewer failures than
# a row quotes, with more pages, is paged on (MORE_ANNOTATIONS_QUERY, bounded by the client).
ANNOTATIONS_PAGE = 50
ANNOTATION_FIELDS = (
    "pageInfo { hasNextPage endCursor } "
    "nodes { annotationLevel path location { start { line } end { line } } message }"
)
ANNOTATIONS_QUERY = f"""
query CheckRunAnnotations($ids: [ID!]!) {{
  {RATE}
  nodes(ids: $ids) {{
    __typename
    ... on CheckRun {{ id databaseId annotations(first: {ANNOTATIONS_PAGE}) {{
      {ANNOTATION_FIELDS} }} }}
  }}
}}
"""


def more_annotations_query(count: int) -> str:
    """The next page of annotations of `count` check runs at once (`$i<k>` node id, `$a<k>`
    cursor), PAGE annotations each (`nodes(ids: [one])`: the same root field as the first page)."""
    params = ", ".join(f"$i{k}: ID!, $a{k}: String" for k in range(count))
    aliases = "\n".join(
        f"  r{k}: nodes(ids: [$i{k}]) {{ __typename ... on CheckRun {{ id "
        f"annotations(first: {PAGE}, after: $a{k}) {{ {ANNOTATION_FIELDS} }} }} }}"
        for k in range(count)
    )
    return f"query MoreAnnotations({params}) {{\n  {RATE}\n{aliases}\n}}\n"


# Who the token acts as, where REST's GET /user refuses the token (an
# installation token: a workflow's GITHUB_TOKEN, an App's): GraphQL's viewer answers it.
VIEWER_QUERY = f"""
query Viewer {{
  {RATE}
  viewer {{ __typename login }}
}}
"""


def pull_comments_query(count: int) -> str:
    """A page of the comments of `count` pull requests (`$n<i>`, `$c<i>`) at once, 100 each:
    how a run with no state finds its own comments (one point per query)."""
    params = ", ".join(f"$n{i}: Int!, $c{i}: String" for i in range(count))
    aliases = "\n".join(
        f"    p{i}: pullRequest(number: $n{i}) {{ comments(first: {PAGE}, after: $c{i}) {{"
        f" totalCount pageInfo {{ hasNextPage endCursor }} nodes {{ {COMMENT_FIELDS} }} }} }}"
        for i in range(count)
    )
    return (
        f"query PullComments($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


def commits_query(shas: list[str], *, queues: int = 0) -> str:
    """The first page of contexts on each of several commits (aliases cN, `object(oid:)`); with
    `queues`, also that many merge queues' configurations (aliases qN, branch `$qN`)."""
    aliases = "\n".join(
        [
            *(
                f'    c{i}: object(oid: "{sha}") {{ ... on Commit {{ statusCheckRollup {{'
                f" {_contexts()} }} }} }}"
                for i, sha in enumerate(shas)
            ),
            *(f"    q{i}: mergeQueue(branch: $q{i}) {{ {QUEUE_CONFIG} }}" for i in range(queues)),
        ]
    )
    params = "".join(f", $q{i}: String!" for i in range(queues))
    return (
        f"query CommitContexts($owner: String!, $name: String!{params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


# -- a failure's history (issue 27) ----------------------------------------------------------

ATTEMPT_SUITES = 5  # check suites of one app holding a check's name on one commit, read at most
ATTEMPT_RUNS = 20  # runs of one name in one suite (every attempt: checkType ALL), read at most
ATTEMPT_RUN_FIELDS = "databaseId name status conclusion startedAt completedAt detailsUrl"


def attempts_query(count: int) -> str:
    """Every run GitHub keeps of `count` checks (`$o<k>` head, `$n<k>` name, `$p<k>` app id)
    on their head commits: the app's suites holding that name, each with its runs of every
    attempt (`checkType: ALL`; the rollup shows only the latest)."""
    params = ", ".join(f"$o{k}: GitObjectID!, $n{k}: String!, $p{k}: Int" for k in range(count))
    aliases = "\n".join(
        f"    a{k}: object(oid: $o{k}) {{ ... on Commit {{ checkSuites(first: {ATTEMPT_SUITES},"
        f" filterBy: {{appId: $p{k}, checkName: $n{k}}}) {{ totalCount nodes {{\n"
        "      app { databaseId slug } workflowRun { event file { path } workflow { name } }\n"
        f"      checkRuns(first: {ATTEMPT_RUNS}, filterBy: {{checkType: ALL, checkName: $n{k}}})"
        f" {{ totalCount nodes {{ {ATTEMPT_RUN_FIELDS} }} }} }} }} }} }}"
        for k in range(count)
    )
    return (
        f"query CheckAttempts($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


def branch_tips_query(count: int) -> str:
    """The newest commit of `count` branches (`$t<i>`, qualified names) the pass's listing did
    not read (one point)."""
    params = ", ".join(f"$t{i}: String!" for i in range(count))
    aliases = "\n".join(f"    t{i}: ref(qualifiedName: $t{i}) {{ {TIP} }}" for i in range(count))
    return (
        f"query BranchTips($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )


BRANCH_COMMITS = 20  # a base branch's last commits read for its record of a check


def branch_history_query(count: int) -> str:
    """The last BRANCH_COMMITS commits of `count` branches (`$b<i>`, qualified names), each
    with the first page of its contexts (about one point for a few branches)."""
    params = ", ".join(f"$b{i}: String!" for i in range(count))
    aliases = "\n".join(
        f"    b{i}: ref(qualifiedName: $b{i}) {{ target {{ ... on Commit {{"
        f" history(first: {BRANCH_COMMITS}) {{ nodes {{ oid statusCheckRollup {{ {_contexts()} }}"
        " } } } } }"
        for i in range(count)
    )
    return (
        f"query BranchHistory($owner: String!, $name: String!, {params}) {{\n"
        f"  {RATE}\n"
        f"  repository(owner: $owner, name: $name) {{\n{aliases}\n  }}\n}}\n"
    )

"""Constrained string and number types shared by the team and cluster models.

Each pattern lives here once, with the sentence users see when a value does not match it
(`PATTERN_HELP`), so pydantic's raw regex never reaches an error message.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, Field, PlainValidator, StrictInt, StrictStr, WithJsonSchema

from generator import quantity
from generator.durations import seconds
from generator.terminal import is_hidden

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
# A label key: optional DNS-subdomain prefix and "/", then a name of at most 63 characters.
LABEL_KEY = (r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
             r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE = r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$"
RESOURCE_NAME = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
KUEUE_VERSION = r"^v[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$"
KUBERNETES_VERSION = r"^1\.[0-9]{1,3}$"
RELEASE = r"^v?[0-9]{1,9}\.[0-9]{1,9}\.[0-9]{1,9}$"
# GitHub CODEOWNERS owner: @user, @org/team or an e-mail address.
OWNER = (r"^(@[A-Za-z0-9](-?[A-Za-z0-9]){0,38}(/[A-Za-z0-9][-A-Za-z0-9_.]{0,99})?"
         r"|[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}\.[A-Za-z]{2,63})$")
# RBAC subject names come from identity providers and may hold almost anything printable.
SUBJECT = r"^[^\x00-\x1f\x7f\u0085\u2028\u2029]{1,256}$"
# An AdmissionCheck's controller: a domain, "/", a name (Kueue's own are refused by the model).
CONTROLLER = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
PARAMETER_KEY = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
PRINTABLE = r"^[\x20-\x7e]*$"
IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
IMAGE_DIGEST = r"^sha256:[a-f0-9]{64}$"

PATTERN_HELP: dict[str, str] = {
    DNS_LABEL: "must be a DNS-1123 label: at most 63 lower-case letters, digits or '-', "
               "starting and ending with a letter or digit",
    DNS_SUBDOMAIN: "must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', "
                   "starting and ending with a letter or digit",
    LABEL_KEY: "must be a Kubernetes label key such as example.com/name (name: at most 63 letters, "
               "digits, '-', '_' or '.')",
    LABEL_VALUE: "must be a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.', "
                 "starting and ending with a letter or digit",
    RESOURCE_NAME: "must be a resource name such as nvidia.com/gpu",
    KUEUE_VERSION: "must be a Kueue release tag such as v0.19.2",
    RELEASE: "must be a release number such as 2.2.1 (or v0.9.0, as the component's chart writes it)",
    KUBERNETES_VERSION: 'must be a Kubernetes minor version in quotes, such as "1.33"',
    OWNER: "must be a GitHub owner (@user or @org/team) or an e-mail address",
    SUBJECT: "must be 1 to 256 characters with no control characters or line breaks",
    CONTROLLER: "must be a controller name such as acme.example/budget-approval",
    PARAMETER_KEY: "must be a parameter name: letters, digits, '-', '_' or '.', starting and ending with "
                   "a letter or digit",
    PRINTABLE: "must be printable ASCII: no control characters or line breaks",
    IMAGE_TAG: "must be an image tag: at most 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
    IMAGE_DIGEST: "must be an image digest: 'sha256:' and 64 lower-case hex digits",
    r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$": "must be a DNS-1035 label: lower-case letters, digits and '-', "
                                          "starting with a letter and ending with a letter or digit",
    r"^[A-Za-z_][A-Za-z0-9_]*$": "must be an environment variable name: letters, digits and '_', "
                                 "not starting with a digit",
    r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$": "must be a container image reference such as "
                                              "registry.example.com/team/train@sha256:...",
}


MAX_QUANTITY = 2**63
MAX_COUNT = 1_000_000
MAX_WEIGHT = 1_000_000


TYPE_NAMES: dict[str, str] = {
    DNS_LABEL: "DNS label", DNS_SUBDOMAIN: "DNS subdomain", LABEL_KEY: "label key", LABEL_VALUE: "label value",
    RESOURCE_NAME: "resource name", KUEUE_VERSION: "Kueue tag", KUBERNETES_VERSION: '"1.NN"',
    OWNER: "GitHub owner or e-mail", SUBJECT: "string", CONTROLLER: "controller name",
    PARAMETER_KEY: "parameter name", PRINTABLE: "string", IMAGE_TAG: "image tag", IMAGE_DIGEST: "sha256:<64 hex>",
    r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$": "DNS-1035 label",
}


def _pattern(regex: str, max_length: int | None = None) -> object:
    # No description here: it would replace each field's own docstring in schema and docs.
    return Field(pattern=regex, max_length=max_length)


def _execution_time(value: str) -> str:
    if not 1 <= seconds(value) <= 2**31 - 1:
        raise ValueError(f"maxExecutionTime {value} is not between 1s and 2147483647s (Kueue's int32 seconds)")
    return value


def _quantity(value: object) -> str | int:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ValueError(f"expected a Kubernetes quantity such as 192, 500m or 1800Gi, got {value!r}")
    amount = quantity.value_of(value)  # raises QuantityError, a ValueError, with a readable sentence
    if amount < 0:
        raise ValueError("must not be negative")
    if amount >= MAX_QUANTITY:
        raise ValueError(f"{value!r} is larger than a Kubernetes quantity can be")
    return value


def _visible_and_unconfusable(value: str) -> str:
    """A subject must read as what it is: RBAC compares code points, reviewers compare glyphs."""
    if value != value.strip():
        raise ValueError("starts or ends with a space, which RBAC keeps (' system:masters' is another group than "
                         "'system:masters'); remove the spaces")
    # Hidden characters (terminal.HIDDEN_CATEGORIES), and spaces other than the plain one.
    ch = next((c for c in value if is_hidden(c) or (unicodedata.category(c) == "Zs" and c != " ")), None)
    if ch is not None:
        raise ValueError(f"contains the invisible or formatting character U+{ord(ch):04X} "
                         f"({unicodedata.name(ch, 'unnamed')})")
    # Outside ASCII only letters and digits: a symbol, punctuation or mark (U+A789 for ':') reads as
    # the ASCII character it looks like, and no confusables table lists them all.
    ch = next((c for c in value if ord(c) > 0x7F and unicodedata.category(c)[0] not in "LN"), None)
    if ch is not None:
        raise ValueError(f"contains U+{ord(ch):04X} ({unicodedata.name(ch, 'unnamed')}), a symbol, punctuation or "
                         "mark outside ASCII that can pass for another character; write it in ASCII")
    if unicodedata.normalize("NFKC", value) != value:
        raise ValueError(f"contains compatibility characters (full-width, ligatures, ...) that display like "
                         f"{unicodedata.normalize('NFKC', value)!r}")
    if value.isascii():  # Latin and Common only: nothing the table could flag (and its 0.1 s import is spared)
        return value
    from confusable_homoglyphs import confusables  # Unicode's confusables.txt (UTS #39)

    found = confusables.is_confusable(value, greedy=False, preferred_aliases=["latin", "common"])
    if found:
        ch = found[0]["character"]
        twin = found[0]["homoglyphs"][0]["c"]
        raise ValueError(f"contains {ch!r} (U+{ord(ch):04X} {found[0]['alias']}), which looks like {twin!r}: "
                         "a look-alike of another name")
    return value


DnsLabel = Annotated[StrictStr, _pattern(DNS_LABEL, 63)]
DnsSubdomain = Annotated[StrictStr, _pattern(DNS_SUBDOMAIN, 253)]
LabelKey = Annotated[StrictStr, _pattern(LABEL_KEY, 317)]
LabelValue = Annotated[StrictStr, _pattern(LABEL_VALUE, 63)]
ResourceName = Annotated[StrictStr, _pattern(RESOURCE_NAME, 317)]
KueueVersion = Annotated[StrictStr, _pattern(KUEUE_VERSION)]
KubernetesVersion = Annotated[StrictStr, _pattern(KUBERNETES_VERSION)]
Release = Annotated[StrictStr, _pattern(RELEASE)]
ExecutionTime = Annotated[StrictStr, _pattern(r"^([0-9]+[smhd])+$", 32), AfterValidator(_execution_time)]
"""A job's longest run once admitted, e.g. `72h`, as Kueue's label takes it: 1 s to 2^31-1 s."""
Owner = Annotated[StrictStr, _pattern(OWNER, 320)]
SubjectName = Annotated[StrictStr, _pattern(SUBJECT), AfterValidator(_visible_and_unconfusable)]
ControllerName = Annotated[StrictStr, _pattern(CONTROLLER, 253)]
ParameterKey = Annotated[StrictStr, _pattern(PARAMETER_KEY, 63)]
ParameterValue = Annotated[StrictStr, _pattern(PRINTABLE, 255)]
ImageTag = Annotated[StrictStr, _pattern(IMAGE_TAG)]
ImageDigest = Annotated[StrictStr, _pattern(IMAGE_DIGEST)]
Quantity = Annotated[str | int, PlainValidator(_quantity),
                     WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}],
                                     "description": "Kubernetes quantity, e.g. 192, 500m, 1800Gi"})]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
PositiveCount = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
"""A count that must be at least 1 (a default `= Field(ge=1)` would not override Count's own bound)."""
MIN_WEIGHT = 0.001


def _weight(value: float) -> float:
    """Kueue reads a weight as a quantity; below a thousandth it is noise, and Python writes it as
    an exponent (7e-78) no quantity accepts."""
    if 0 < value < MIN_WEIGHT:
        raise ValueError(f"{value!r} is between 0 and {MIN_WEIGHT}: use 0 (no fair share) or at least {MIN_WEIGHT}")
    return value


Weight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False), AfterValidator(_weight)]
ResourceWeight = Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False)]
"""How much a resource counts in Kueue's usage (a float in its configuration, not a quantity)."""
Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=2**31 - 1)]
GoDuration = Annotated[StrictStr, Field(pattern=r"^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$", max_length=32)]
"""A duration as Go's time.ParseDuration reads it (Kueue's configuration), e.g. 10m, 1h30m."""
ResourcePrefix = Annotated[StrictStr, Field(pattern=r"^[a-z0-9]([-a-z0-9./]*[a-z0-9./])?$", max_length=253)]
"""The start of a resource name, e.g. `ephemeral-storage` or `rdma/`."""
Framework = Annotated[StrictStr, Field(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[a-z0-9]([-a-z0-9]*[a-z0-9])?)?$",
                                       max_length=253)]
"""A Kueue integration name, e.g. `batch/job`, `jobset.x-k8s.io/jobset`, `pod`."""

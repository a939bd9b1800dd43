"""What the simulator will serve, worked out from an Exchange config before anything listens.

:func:`build_spec` turns a loaded :class:`exchange._config.Config` into a :class:`PlantSpec`: every
device of the config with the protocol that serves it (:mod:`simulators.devices`), every tag a point
at its address with its type, the ``[simulation]`` settings (initial values, follows, the model).
Tags at the same address of one device are one point (so a ``ro`` view and an ``rw`` view of a
register share the value); they must agree on the type. A bit of a register (Modbus ``HR10.3``) is a
point of its own beside the register's 16-bit word and its other bits: they are one register group
(:mod:`simulators.register_bits`), served from one register and kept consistent in the plant.

Everything the simulator cannot serve is collected and raised as one :class:`SimulationError` that
names each device and tag: a driver or transport it does not serve, an address it cannot hold, two
tags at one address with different types (or overlapping registers), a tag whose type nobody says,
an ``initial`` that does not fit the type, a ``follows`` between types that cannot follow each other, a
bit of a register inside a value wider than one register, a bit and its word starting at values that
disagree.

An array tag (``type = "Int16[]"``, OPC UA) is a point holding a list; its ``initial`` is a list (the
array's length: without one it starts empty). A tag that declares its length (``type = "Int16[5]"``)
is a fixed array: it starts at that many zeros, its ``initial`` has that many elements, and its node
declares the length (ArrayDimensions), as a PLC's array does. A tag with ``[simulation.tags."PATH".methods]`` is not a
point but an object (OPC UA) whose methods the model's functions answer (:class:`MethodSpec`).

A tag without a type (OPC UA, or Logix with ``upload_tags = true``: the device would tell the
gateway) is served with its ``[simulation.tags] type``, else the type its ``initial`` suggests (a boolean
serves a Boolean, an integer an Int32 (Logix DINT), a float a Float64 (OPC UA Double; Logix REAL,
Float32), a string a String), else, for a ``follows``, its source's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from exchange._config import Config, DeviceConfig
from exchange._config_simulation import SimulatedTagConfig
from exchange._tags.paths import parse_tag_path
from exchange._tags.table import TagDef, TagTable
from exchange._values import DataType, parse_data_type
from exchange._values.convert import coerce_value
from exchange.errors import ConfigError, TagError
from simulators.devices import kind_of
from simulators.devices.base import DeviceKind, Endpoint, Slot, UnservableError
from simulators.register_bits import WORD_TYPE_NAMES, WORD_TYPES, RegisterGroups, reconcile_initials


class SimulationError(ConfigError):
    """The config cannot be simulated as it is; the message names every device and tag at fault."""


@dataclass(frozen=True)
class PointSpec:
    """One served value: a device address with its type; ``paths`` are the tags that name it."""

    id: str  # "device:address", the address as its first tag writes it
    device: str
    address: str
    data_type: DataType
    writable: bool  # clients may write it: a tag on it is "rw" and its protocol can write the address
    initial: Any
    paths: tuple[str, ...]
    initial_given: bool = False  # ``initial`` came from [simulation.tags] (not the type's zero)
    array: bool = False  # a one-dimensional array of data_type: the value is a list
    bit: int | None = None  # a bit of a register (Modbus HR10.3): its number, 0 the least significant
    length: int | None = None  # a fixed array (type = "Int16[5]"): its number of elements


@dataclass(frozen=True)
class ArgumentSpec:
    name: str
    data_type: DataType
    array: bool = False


@dataclass(frozen=True)
class MethodSpec:
    """Method ``name`` of the object at ``address`` on ``device`` (tag ``path``), answered by the
    model's function ``call(plant, *inputs)``."""

    device: str
    path: str
    address: str
    name: str
    inputs: tuple[ArgumentSpec, ...]
    outputs: tuple[ArgumentSpec, ...]
    call: str


@dataclass(frozen=True)
class FollowSpec:
    """``follower`` takes ``source``'s value ``delay_ms`` after each change of it (point ids)."""

    follower: str
    source: str
    delay_ms: int
    follower_path: str
    source_path: str


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    config: DeviceConfig
    kind: DeviceKind
    endpoint: Endpoint
    points: tuple[str, ...]  # point ids, in config order
    methods: tuple[MethodSpec, ...] = ()


@dataclass(frozen=True)
class PlantSpec:
    config: Config
    devices: Mapping[str, DeviceSpec]
    points: Mapping[str, PointSpec]
    tags: TagTable
    point_of_tag: Mapping[str, str]  # canonical tag path -> point id
    tag_types: Mapping[str, DataType] = field(default_factory=dict)  # config path (as written) -> type served
    follows: tuple[FollowSpec, ...] = ()
    tick_ms: int = 100
    model: str | None = None
    methods: tuple[MethodSpec, ...] = ()
    word_of: Mapping[str, str] = field(default_factory=dict)  # bit point id -> its register's word point id

    @cached_property
    def registers(self) -> RegisterGroups:
        """The words and bits that share a register (:mod:`simulators.register_bits`)."""
        return RegisterGroups(self.word_of, {pid: p.bit for pid, p in self.points.items() if p.bit is not None})


def zero_of(data_type: DataType, array: bool = False, length: int | None = None) -> Any:
    """What a point without ``initial`` starts at: False, 0, 0.0 or "" (an array: empty, or ``length``
    of those)."""
    if array:
        return [zero_of(data_type)] * (length or 0)
    if data_type is DataType.BOOLEAN:
        return False
    if data_type is DataType.STRING:
        return ""
    return 0 if data_type.is_integer else 0.0


def _family(point: PointSpec) -> str:
    family = str(point.data_type.value) if point.data_type in (DataType.BOOLEAN, DataType.STRING) else "number"
    return f"array of {family}" if point.array else family


def _describe(point: PointSpec) -> str:
    return point.data_type.value + (f"[{point.length or ''}]" if point.array else "")


def initial_value(value: Any, data_type: DataType, array: bool, length: int | None = None) -> Any:
    """``[simulation.tags] initial`` as the point holds it (TagError when it does not fit)."""
    if length is not None and isinstance(value, list) and len(value) != length:
        raise TagError(f"initial {value!r} has {len(value)} element(s), but the tag holds {length} "
                       f'(type = "{data_type.value}[{length}]")')
    if array != isinstance(value, list):
        raise TagError(f"initial {value!r}: an array tag starts at a list ([1, 2, 3]), a scalar tag at one value"
                       if array else f"initial {value!r}: a list is the initial of an array tag (type = "
                       f'"{data_type.value}[]")')
    if array:
        return [coerce_value(item, data_type, f"initial element [{index}] {item!r}")
                for index, item in enumerate(value)]
    return coerce_value(value, data_type, f"initial {value!r}")


class _Builder:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.errors: list[str] = []
        self.table = TagTable.from_config(config)  # the gateway's own checks first (ConfigError naming the tag)
        self.sim_tags: Mapping[str, SimulatedTagConfig] = config.simulation.tags
        self.devices: dict[str, tuple[DeviceConfig, DeviceKind, Endpoint]] = {}
        self.points: dict[str, PointSpec] = {}
        self.by_slot: dict[tuple[str, Any], str] = {}
        self.spans: dict[str, list[tuple[tuple[Any, int, int], str]]] = {}  # device -> (span, point id)
        self.word_of: dict[str, str] = {}
        self.groups: dict[tuple[str, Any], tuple[Any, DataType, str]] = {}
        self.point_of_tag: dict[str, str] = {}
        self.tag_types: dict[str, DataType] = {}
        self.methods: list[MethodSpec] = []

    def device(self, name: str, device: DeviceConfig) -> None:
        where = f"device {name!r} ({device.driver})"
        try:
            kind = kind_of(device.driver)
            endpoint = kind.endpoint(device)
        except (UnservableError, ConfigError) as exc:
            self.errors.append(f"{where}: {exc}")
            return
        self.devices[name] = (device, kind, endpoint)
        self.spans[name] = []

    def tag(self, written: str, tag: TagDef, *, last_chance: bool = False) -> bool:
        """Place ``tag`` on its device; False when its type can only come from the tag it follows
        and that is not placed yet (then it is tried again, ``last_chance`` the final time)."""
        where = f"tag {tag.path!r} (device {tag.device!r}, address {tag.address!r})"
        if tag.device not in self.devices:
            return True  # its device is already refused
        device, kind, _ = self.devices[tag.device]
        sim = self.sim_tags.get(written)
        if sim is not None and sim.methods:
            self._methods(tag, kind, device, sim, where)
            return True
        try:
            if tag.array and not kind.arrays:
                raise UnservableError(f"the {kind.driver} simulator serves no array tags")
            slot = kind.slot(device, tag.address, tag.data_type)
            data_type = slot.data_type or tag.data_type
            served = _served_type(sim, data_type)
            if data_type is None and served is None:
                given = sim.initial if sim is not None else None
                if isinstance(given, list):
                    raise UnservableError(f"initial {given!r} is a list: an array tag says its type "
                                          "(type = \"Int16[]\" in [tags])")
                if given is not None:
                    served = kind.infer_type(given)
                elif sim is not None and sim.follows is not None:
                    source = self.point_of_tag.get(str(parse_tag_path(sim.follows)))
                    if source is None and not last_chance:
                        return False
                    served = self.points[source].data_type if source is not None else None
                if served is None:
                    raise UnservableError(
                        f"has no type: the device would tell the gateway, but the simulator must know: give "
                        f"[simulation.tags.\"{written}\"] a `type` (or an `initial` value to take it from)")
            data_type = data_type or served
            assert data_type is not None
            kind.check_type(data_type)
            initial = zero_of(data_type, tag.array, tag.length)
            if sim is not None and sim.initial is not None:
                initial = initial_value(sim.initial, data_type, tag.array, tag.length)
        except (UnservableError, TagError) as exc:
            self.errors.append(f"{where}: {exc}")
            return True
        self.tag_types[written] = data_type
        self._place(tag, slot, data_type, initial, sim is not None and sim.initial is not None, where)
        return True

    def _methods(self, tag: TagDef, kind: DeviceKind, device: DeviceConfig, sim: SimulatedTagConfig,
                 where: str) -> None:
        """The tag is an object: each of its methods, with its arguments typed."""
        try:
            if not kind.methods:
                raise UnservableError(f"the {kind.driver} simulator serves no methods (OPC UA does)")
            if tag.data_type is not None:
                raise UnservableError(f"a tag with methods is an object: it has no type (type = "
                                      f"{tag.data_type.value!r})")
            kind.slot(device, tag.address, None)  # an address the device can hold
        except (UnservableError, TagError) as exc:
            self.errors.append(f"{where}: {exc}")
            return
        for name, method in sim.methods.items():
            def arguments(given: tuple[Any, ...]) -> tuple[ArgumentSpec, ...]:
                return tuple(ArgumentSpec(a.name, parse_data_type(a.data_type), a.array) for a in given)

            self.methods.append(MethodSpec(tag.device, tag.path, tag.address, name, arguments(method.inputs),
                                           arguments(method.outputs), method.call))

    def _place(self, tag: TagDef, slot: Slot, data_type: DataType, initial: Any, given: bool, where: str) -> None:
        writable = tag.access == "rw" and tag.writable
        existing_id = self.by_slot.get((tag.device, slot.key))
        if existing_id is not None:
            point = self.points[existing_id]
            if point.data_type is not data_type or point.array != tag.array or point.length != tag.length:
                this = data_type.value + (f"[{tag.length or ''}]" if tag.array else "")
                self.errors.append(f"{where}: tag {point.paths[0]!r} is at the same address as "
                                   f"{_describe(point)}, this one as {this}: one address holds one type")
                return
            if given and point.initial_given and point.initial != initial:
                self.errors.append(f"{where}: tag {point.paths[0]!r} at the same address starts at {point.initial!r}, "
                                   f"this one at {initial!r}")
                return
            self.points[existing_id] = replace(
                point, writable=point.writable or writable, paths=(*point.paths, tag.path),
                initial=initial if given else point.initial, initial_given=point.initial_given or given)
            self.point_of_tag[tag.path] = existing_id
            return
        if slot.group is not None:
            name, signature = slot.group
            seen = self.groups.get((tag.device, name))
            if seen is not None and (seen[0], seen[1]) != (signature, data_type):
                self.errors.append(f"{where}: tag {seen[2]!r} uses {name!r} as a {seen[0]} of {seen[1].value}, "
                                   f"this one as a {signature} of {data_type.value}")
                return
            self.groups.setdefault((tag.device, name), (signature, data_type, tag.path))
        point_id = f"{tag.device}:{tag.address}"
        if slot.span is not None:
            self.spans[tag.device].append((slot.span, point_id))
        self.by_slot[(tag.device, slot.key)] = point_id
        self.points[point_id] = PointSpec(point_id, tag.device, tag.address, data_type, writable, initial,
                                          (tag.path,), given, tag.array, slot.bit, tag.length)
        self.point_of_tag[tag.path] = point_id

    def overlaps(self) -> None:
        """Different points whose registers overlap (``HRF1`` and ``HR2``) cannot both be served, except
        the bits of a register beside each other and beside a 16-bit word of that register (then the
        bit's word is noted in :attr:`word_of`)."""
        for device, spans in self.spans.items():
            ordered = sorted(spans, key=lambda item: (repr(item[0][0]), item[0][1], item[0][2]))
            for index, (span, first_id) in enumerate(ordered):
                for next_span, next_id in ordered[index + 1:]:
                    if next_span[0] != span[0] or next_span[1] >= span[2]:
                        break
                    problem = self._overlap(self.points[first_id], self.points[next_id])
                    if problem is not None:
                        later = self.points[next_id]
                        self.errors.append(f"tag {later.paths[0]!r} (device {device!r}, address {later.address!r}): "
                                           f"{problem}")

    def _overlap(self, first: PointSpec, later: PointSpec) -> str | None:
        """Why two points over the same registers cannot be served (None: they can)."""
        if first.bit is not None and later.bit is not None:
            return None  # two bits of one register (the same bit is one point)
        if first.bit is None and later.bit is None:
            return (f"it overlaps tag {first.paths[0]!r} at {first.address!r}: two values cannot share a "
                    "register")
        bit, word = (first, later) if first.bit is not None else (later, first)
        if word.data_type not in WORD_TYPES or word.array:
            return (f"tag {bit.paths[0]!r} at {bit.address!r} is a bit of a register inside tag {word.paths[0]!r} "
                    f"at {word.address!r} ({_describe(word)}): a bit shares its register only with a 16-bit word "
                    f"({WORD_TYPE_NAMES})")
        self.word_of[bit.id] = word.id
        return None

    def reconcile(self, followers: tuple[str, ...], *, report: bool = True) -> None:
        """Each register group starts consistent (:func:`simulators.register_bits.reconcile_initials`);
        ``report``: keep what contradicts (said once, by the last call)."""
        groups = RegisterGroups(self.word_of, {pid: p.bit for pid, p in self.points.items() if p.bit is not None})
        errors = reconcile_initials(self.points, groups, followers)
        if report:
            self.errors.extend(errors)

    def follows(self) -> tuple[FollowSpec, ...]:
        found: list[FollowSpec] = []
        followed: dict[str, str] = {}
        for written, sim in self.sim_tags.items():
            if sim.follows is None:
                continue
            follower_path, source_path = str(parse_tag_path(written)), str(parse_tag_path(sim.follows))
            follower = self.point_of_tag.get(follower_path)
            source = self.point_of_tag.get(source_path)
            if follower is None or source is None:
                continue  # that tag is already refused
            where = f"tag {follower_path!r}: follows {source_path!r}"
            a, b = self.points[follower], self.points[source]
            if follower == source:
                self.errors.append(f"{where}, which is the same point (address {a.address!r})")
                continue
            if _family(a) != _family(b):
                self.errors.append(f"{where}, but a {_describe(a)} cannot take a {_describe(b)} value")
                continue
            if follower in followed:
                self.errors.append(f"{where}, but its point already follows {followed[follower]!r}")
                continue
            followed[follower] = source_path
            found.append(FollowSpec(follower, source, sim.delay_ms, follower_path, source_path))
            if not a.initial_given:  # a feedback at rest shows what its command says
                self.points[follower] = replace(a, initial=follow_value(b.initial, a.data_type))
        return tuple(found)


def _served_type(sim: SimulatedTagConfig | None, data_type: DataType | None) -> DataType | None:
    """``[simulation.tags] type``, parsed; it must agree with the tag's own type where it has one."""
    if sim is None or sim.data_type is None:
        return None
    served = parse_data_type(sim.data_type)
    if data_type is not None and served is not data_type:
        raise UnservableError(f"[simulation.tags] type is {served.value}, but the tag is {data_type.value}")
    return served


def follow_value(value: Any, data_type: DataType) -> Any:
    """What a follower of ``data_type`` takes from a source (of the same family) holding ``value``:
    a number is rounded for an integer type and made a float for a float type (an array: each element)."""
    if isinstance(value, list):
        return [follow_value(item, data_type) for item in value]
    if data_type.is_integer and not isinstance(value, bool):
        return int(round(value))
    if data_type.is_float and not isinstance(value, bool):
        return float(value)
    return value


def build_spec(config: Config) -> PlantSpec:
    """The :class:`PlantSpec` of ``config``; SimulationError naming everything that cannot be served."""
    builder = _Builder(config)
    for name, device in config.devices.items():
        builder.device(name, device)
    waiting = [written for written in config.tags if not builder.tag(written, builder.table.get(written))]
    while waiting:  # followers that take their type from their source: until no more can be placed
        still = [written for written in waiting if not builder.tag(written, builder.table.get(written))]
        if len(still) == len(waiting):
            for written in still:
                builder.tag(written, builder.table.get(written), last_chance=True)
            break
        waiting = still
    builder.overlaps()
    builder.reconcile((), report=False)  # a follower at rest takes its source's value as the source starts
    follows = builder.follows()
    builder.reconcile(tuple(follow.follower for follow in follows))
    if builder.errors:
        lines = "\n".join(f"  - {error}" for error in builder.errors)
        raise SimulationError(f"{config.source}: the simulator cannot serve this config:\n{lines}")
    devices = {
        name: DeviceSpec(name, device, kind, endpoint,
                         tuple(pid for pid, point in builder.points.items() if point.device == name),
                         tuple(method for method in builder.methods if method.device == name))
        for name, (device, kind, endpoint) in builder.devices.items()
    }
    return PlantSpec(config=config, devices=devices, points=dict(builder.points), tags=builder.table,
                     point_of_tag=builder.point_of_tag, tag_types=builder.tag_types, follows=follows,
                     tick_ms=config.simulation.tick_ms, model=config.simulation.model, methods=tuple(builder.methods),
                     word_of=builder.word_of)

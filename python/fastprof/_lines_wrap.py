"""What ``LineProfiler(obj)`` registers and returns: the plain functions behind a callable, and
a profiling wrapper of the same kind as what was decorated (line_profiler 5.1's semantics).

A wrapper switches the profiler on (by count) while the function runs; a generator's, a
coroutine's and an async generator's only while it steps, never while it is suspended.  The
hot path stays the C tracer: a wrapper costs one enable/disable pair per call, nothing per
line.
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from typing import Any, Callable, List, NamedTuple, Optional, Set

# The attribute a profiling wrapper carries: which function it profiles, for which profiler.
MARK = "__fastprof_lines_wrapper__"

_C_CALLABLES = (
    types.BuiltinFunctionType,
    types.BuiltinMethodType,
    types.ClassMethodDescriptorType,
    types.MethodDescriptorType,
    types.MethodWrapperType,
    types.WrapperDescriptorType,
)


def warn(message: str, category: type = UserWarning, stacklevel: int = 1) -> None:
    """warnings.warn(message, category, stacklevel) as if called where this is called, with
    warnings loaded on first use (3.13 no longer loads it at start-up, and `fastprof run
    --lines` loads nothing before the script that cProfile does not).  Returns None."""
    import warnings

    warnings.warn(message, category, stacklevel=stacklevel + 1)


class WrapperInfo(NamedTuple):
    """What a profiling wrapper profiles (the innermost function) and whose it is."""

    func: Callable[..., Any]
    profiler_id: int


def is_c_callable(obj: Any) -> bool:
    """Whether obj is a callable implemented in C (nothing to time line by line)."""
    return isinstance(obj, _C_CALLABLES)


def wrapper_info(obj: Any) -> Optional[WrapperInfo]:
    """The WrapperInfo of a profiling wrapper, None for anything else."""
    info = getattr(obj, MARK, None) if isinstance(obj, types.FunctionType) else None
    return info if isinstance(info, WrapperInfo) else None


def child_of_class(cls: type, obj: Any) -> bool:
    """Whether obj (a function or class) is defined directly in cls's body: its qualified
    name says so (not its ``__module__``: a class's may have been reassigned, as pandas'
    ``DataFrame.__module__`` is ``"pandas"``)."""
    name = getattr(obj, "__name__", None)
    return (
        isinstance(name, str) and getattr(obj, "__qualname__", None) == f"{cls.__qualname__}.{name}"
    )


def _package(module: Any) -> Any:
    """The top-level package of a module's name (``pandas`` for ``pandas.core.frame``); a
    value that is no name is returned as it is."""
    return module.partition(".")[0] if isinstance(module, str) else module


def same_module(namespace: Any, obj: Any) -> bool:
    """Whether obj (a function or class) is defined in namespace: in a class's own body (its
    qualified name says so: a class's ``__module__`` may have been reassigned, as pandas'
    ``DataFrame.__module__`` is ``"pandas"``) or in the class's module, or in a module (its
    ``__module__``; for a class, also when a function of its own body was defined there)."""
    if isinstance(namespace, type):
        qual = getattr(obj, "__qualname__", None)
        if isinstance(qual, str) and qual.startswith(namespace.__qualname__ + "."):
            # named in the body, and from the class's package: a namedtuple's methods are
            # named so too, but their code is collections' own, shared by every namedtuple
            return _package(getattr(obj, "__module__", None)) == _package(namespace.__module__)
        # a function of the class's module put in its body (line_profiler takes it too)
        return getattr(obj, "__module__", None) == namespace.__module__
    module = namespace.__name__
    if getattr(obj, "__module__", None) == module:
        return True
    if isinstance(obj, type):
        prefix = obj.__qualname__ + "."
        return any(
            isinstance(v, types.FunctionType)
            and v.__module__ == module
            and v.__qualname__.startswith(prefix)
            for v in vars(obj).values()
        )
    return False


def underlying(
    obj: Any, stop_at_classes: bool = False, seen: Optional[Set[int]] = None
) -> List[Any]:
    """The Python functions behind obj: a method's, classmethod's, staticmethod's, partial's,
    partialmethod's, cached_property's function, a property's accessors, a class's own
    functions (those defined in its body), a callable object's ``__call__``.  Classes are
    returned as they are when stop_at_classes.  C callables give [].  Raises TypeError when
    obj is not callable nor a wrapper of callables."""
    seen = set() if seen is None else seen
    if isinstance(obj, (types.MethodType, classmethod, staticmethod)):
        return underlying(obj.__func__, stop_at_classes, seen)
    if isinstance(obj, (functools.partial, functools.partialmethod, functools.cached_property)):
        return underlying(obj.func, stop_at_classes, seen)
    if isinstance(obj, property):
        return [
            f
            for acc in (obj.fget, obj.fset, obj.fdel)
            if acc is not None
            for f in underlying(acc, stop_at_classes, seen)
        ]
    if isinstance(obj, type):
        if stop_at_classes:
            return [obj]
        found: List[Any] = []
        for member in vars(obj).values():
            try:
                impls = underlying(member, True, seen)
            except TypeError:
                continue
            for impl in impls:
                if not child_of_class(obj, impl):
                    continue
                if isinstance(impl, type):
                    found.extend(underlying(impl, False, seen))
                else:
                    found.append(impl)
        return found
    if not callable(obj):
        raise TypeError(
            f"func must be a Python function, method, property, classmethod, "
            f"staticmethod, partial, class or callable object, not "
            f"{type(obj).__name__}"
        )
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, types.FunctionType):
        return [obj]
    if is_c_callable(obj):
        return []
    call = inspect.getattr_static(type(obj), "__call__", None)
    if isinstance(call, types.FunctionType):
        return [call]
    # a callable object of C (jax.jit's, numba's dispatcher): the Python function it was made
    # from, as add_function follows __wrapped__
    inner = getattr(obj, "__wrapped__", None)
    if inner is None or inner is obj:
        return []
    try:
        return underlying(inner, stop_at_classes, seen)
    except TypeError:
        return []


# the packages whose callable objects run compiled code in place of the Python function they
# name (``__wrapped__``): a C call alone does not say so (functools.lru_cache's calls the
# function as Python on a miss)
_COMPILERS = frozenset({"numba", "jax", "jaxlib"})


def is_compiled_wrapper(obj: Any) -> bool:
    """Whether obj is a jit-compiled function of a known compiler (jax.jit's, numba's
    dispatcher) that names the Python function it was made from (``__wrapped__``): that
    function's lines run only when it runs as Python (traced, or a fallback)."""
    module = getattr(type(obj), "__module__", None) or ""
    return module.partition(".")[0] in _COMPILERS and isinstance(
        getattr(obj, "__wrapped__", None), types.FunctionType
    )


class Wrapping:
    """The decorator side of LineProfiler: ``wrap_callable`` and its helpers.  Needs
    ``enable_by_count``/``disable_by_count`` from the class it is mixed into."""

    def enable_by_count(self) -> None:  # pragma: no cover - LineProfiler's
        raise NotImplementedError

    def disable_by_count(self) -> None:  # pragma: no cover - LineProfiler's
        raise NotImplementedError

    def _own_wrapper(self, obj: Any) -> bool:
        """Whether obj is a wrapper this profiler made."""
        info = wrapper_info(obj)
        return info is not None and info.profiler_id == id(self)

    def _mark(self, wrapper: Callable[..., Any], func: Callable[..., Any]) -> Callable[..., Any]:
        """wrapper, marked as this profiler's wrapper of func (of func's innermost function
        when func is another profiler's wrapper)."""
        info = wrapper_info(func)
        setattr(wrapper, MARK, WrapperInfo(info.func if info else func, id(self)))
        return wrapper

    def wrap_callable(self, func: Any) -> Any:
        """A profiling wrapper of the same kind as func (the same object for a class, whose
        own members are wrapped in place, for this profiler's own wrappers and for C
        callables).  Raises TypeError when func is not callable."""
        if is_c_callable(func):
            return func
        if isinstance(func, (classmethod, staticmethod)):
            return self._rebuild(func, type(func)(self.wrap_callable(func.__func__)))
        if isinstance(func, types.MethodType):
            return types.MethodType(self.wrap_callable(func.__func__), func.__self__)
        if isinstance(func, functools.partialmethod):
            return functools.partialmethod(
                self.wrap_callable(func.func), *func.args, **func.keywords
            )
        if isinstance(func, functools.partial):
            return self._rebuild(
                func, type(func)(self.wrap_callable(func.func), *func.args, **func.keywords)
            )
        if isinstance(func, property):
            return self._wrap_property(func)
        if isinstance(func, functools.cached_property):
            new = functools.cached_property(self.wrap_callable(func.func))
            new.attrname = func.attrname
            return self._rebuild(func, new)
        if isinstance(func, type):
            return self.wrap_class(func)
        if not callable(func):
            raise TypeError(
                f"func must be callable or a wrapper of callables, not {type(func).__name__}"
            )
        if self._own_wrapper(func):
            return func
        if inspect.isasyncgenfunction(func):
            return self._mark(self._wrap_async_generator(func), func)
        if inspect.iscoroutinefunction(func):
            return self._mark(self._wrap_coroutine(func), func)
        if inspect.isgeneratorfunction(func):
            return self._mark(self._wrap_generator(func), func)
        return self._mark(self._wrap_function(func), func)

    @staticmethod
    def _rebuild(old: Any, new: Any) -> Any:
        """new, with the instance attributes of old that it lacks (a descriptor's name,
        ``__doc__``, what a user attached)."""
        try:
            old_vars, new_vars = vars(old), vars(new)
        except TypeError:
            return new
        for key, value in old_vars.items():
            new_vars.setdefault(key, value)
        return new

    def _wrap_property(self, prop: property) -> property:
        """A property of prop's type whose accessors are wrapped."""
        accessors = [
            None if acc is None else self.wrap_callable(acc)
            for acc in (prop.fget, prop.fset, prop.fdel)
        ]
        new = type(prop)(accessors[0], accessors[1], accessors[2], prop.__doc__)
        name = getattr(prop, "__name__", None)
        if name is not None:
            try:
                new.__name__ = name  # type: ignore[attr-defined]
            except AttributeError:
                pass
        return self._rebuild(prop, new)

    def wrap_class(self, cls: type) -> type:
        """cls, with the members defined in its own body replaced by profiling wrappers
        (inherited and foreign members are left alone).  Warns for members that cannot be
        set."""
        failed = []
        for name, member in list(vars(cls).items()):
            try:
                impls = underlying(member, stop_at_classes=True)
            except TypeError:
                continue
            if not any(child_of_class(cls, impl) for impl in impls):
                continue
            wrapper = self.wrap_callable(member)
            if wrapper is member:
                continue
            try:
                setattr(cls, name, wrapper)
            except (TypeError, AttributeError):
                failed.append(name)
        if failed:
            warn(
                f"cannot wrap {', '.join(failed)} of {cls.__qualname__}: the class "
                f"does not allow setting them",
                stacklevel=3,
            )
        return cls

    def _wrap_function(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.enable_by_count()
            try:
                return func(*args, **kwargs)
            finally:
                self.disable_by_count()

        return wrapper

    def _wrap_coroutine(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.enable_by_count()
            try:
                return await func(*args, **kwargs)
            finally:
                self.disable_by_count()

        return wrapper

    def _step(self, advance: Callable[[], Any]) -> Any:
        """advance() with profiling on (by count); at the interpreter's exit (a suspended
        generator closed then), without: nothing of the profile is read after that."""
        if sys.is_finalizing():
            return advance()
        self.enable_by_count()
        try:
            return advance()
        finally:
            self.disable_by_count()

    def _wrap_generator(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """A generator function that runs func's generator with profiling on for each step
        (not while the consumer holds it); send, throw and close reach it."""

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            gen = func(*args, **kwargs)
            try:
                item = self._step(lambda: next(gen))
                while True:
                    try:
                        sent = yield item
                    except GeneratorExit:
                        self._step(gen.close)
                        raise
                    except BaseException as exc:
                        item = self._step(functools.partial(gen.throw, exc))
                    else:
                        item = self._step(functools.partial(gen.send, sent))
            except StopIteration as stop:
                return stop.value

        return wrapper

    def _wrap_async_generator(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """An async generator function that runs func's with profiling on for each step;
        asend and athrow reach it (aclose reaches it through its finalizer)."""

        @functools.wraps(func)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            agen = func(*args, **kwargs)
            sent: Any = None
            thrown: Optional[BaseException] = None
            while True:
                self.enable_by_count()
                try:
                    if thrown is not None:
                        item = await agen.athrow(thrown)
                    else:
                        item = await agen.asend(sent)
                except StopAsyncIteration:
                    return
                finally:
                    thrown = None  # no cycle through the exception's traceback
                    self.disable_by_count()
                try:
                    sent = yield item
                except Exception as exc:  # athrow(); aclose()'s GeneratorExit goes through
                    thrown = exc

        return wrapper

//! `HandlerTask`: runs one async HTTP handler's coroutine, as an asyncio task would.
//!
//! Why not `loop.create_task`: on Python 3.11 a task costs ~12k instructions
//! before the coroutine does anything (its "Task-N" name, a Python-level
//! `WeakSet` registration and its removal, a scheduled first step), about a
//! fifth of a whole async request. This object drives the coroutine the way
//! `asyncio.Task.__step` does: the first step runs at once (as Python 3.12's
//! eager tasks do), each step runs in the task's own copy of the context and
//! with the task entered as the loop's current task, a yielded future wakes it
//! through `add_done_callback`, and `cancel()`/`cancelling()`/`uncancel()` keep
//! the semantics `asyncio.timeout()` and `TaskGroup` rely on. It is not in
//! `asyncio.all_tasks()`. When the coroutine ends, `on_done(*args, ok, value)`
//! is called: `ok` with the return value, else with the exception (a
//! `CancelledError` when cancelled).

use pyo3::exceptions::{PyRuntimeError, PyStopIteration};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::{intern, PyTraverseError, PyVisit};

struct Asyncio {
    /// The loop -> current task map behind `asyncio.current_task()`.
    current_tasks: Py<PyDict>,
    cancelled_error: Py<PyType>,
    invalid_state_error: Py<PyType>,
}

static ASYNCIO: GILOnceCell<Asyncio> = GILOnceCell::new();

fn asyncio(py: Python<'_>) -> PyResult<&'static Asyncio> {
    ASYNCIO.get_or_try_init(py, || {
        let tasks = py.import("asyncio.tasks")?;
        let exceptions = py.import("asyncio.exceptions")?;
        Ok(Asyncio {
            // What `asyncio._enter_task`/`_leave_task` update, set directly: two
            // Python-level calls per step would cost more than the rest of it.
            current_tasks: tasks.getattr("_current_tasks")?.downcast_into()?.unbind(),
            cancelled_error: exceptions
                .getattr("CancelledError")?
                .downcast_into()?
                .unbind(),
            invalid_state_error: exceptions
                .getattr("InvalidStateError")?
                .downcast_into()?
                .unbind(),
        })
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Finished,
    Cancelled,
    Failed,
}

#[pyclass(module = "surge._core", weakref)]
pub struct HandlerTask {
    coro: Option<PyObject>,
    loop_: PyObject,
    context: PyObject,
    on_done: Option<PyObject>,
    done_args: Option<Py<PyTuple>>,
    name: PyObject,
    /// The future the coroutine waits on, if any.
    waiter: Option<PyObject>,
    must_cancel: bool,
    cancel_msg: Option<PyObject>,
    cancel_requests: u32,
    state: State,
    /// The return value, or the exception the coroutine ended with.
    outcome: Option<PyObject>,
    callbacks: Vec<PyObject>,
    started: bool,
}

enum Step {
    Send,
    Throw(PyObject),
}

impl HandlerTask {
    fn cancelled_error(py: Python<'_>, msg: Option<&PyObject>) -> PyResult<PyObject> {
        let cls = asyncio(py)?.cancelled_error.bind(py);
        Ok(match msg {
            Some(m) => cls.call1((m.clone_ref(py),))?.unbind(),
            None => cls.call0()?.unbind(),
        })
    }
}

/// One step of the coroutine, as `Task.__step`.
fn step(slf: &Bound<'_, HandlerTask>, mut how: Step) -> PyResult<()> {
    let py = slf.py();
    let aio = asyncio(py)?;
    let (coro, loop_, context) = {
        let mut t = slf.borrow_mut();
        if t.state != State::Pending {
            return Ok(());
        }
        if t.must_cancel {
            let is_cancel = matches!(&how, Step::Throw(e) if e.bind(py).is_instance(aio.cancelled_error.bind(py))?);
            if !is_cancel {
                how = Step::Throw(HandlerTask::cancelled_error(py, t.cancel_msg.as_ref())?);
            }
            t.must_cancel = false;
        }
        t.waiter = None;
        let Some(coro) = t.coro.as_ref().map(|c| c.clone_ref(py)) else {
            return Ok(());
        };
        (coro, t.loop_.clone_ref(py), t.context.clone_ref(py))
    };
    // Entered as the loop's current task for the step. Started from inside
    // another task (a request handed over by code running in one), that task
    // steps aside for this step, as with Python 3.12's eager tasks.
    let current = aio.current_tasks.bind(py);
    let outer = current.get_item(&loop_)?;
    current.set_item(&loop_, slf)?;
    let leave = |py: Python<'_>| -> PyResult<()> {
        let current = aio.current_tasks.bind(py);
        match &outer {
            Some(o) => current.set_item(&loop_, o),
            None => current.del_item(&loop_),
        }
    };
    // SAFETY: `context` is a contextvars.Context we own a reference to; Enter
    // and Exit are paired on this thread, with the GIL held throughout.
    if unsafe { ffi::PyContext_Enter(context.as_ptr()) } != 0 {
        let err = PyErr::fetch(py);
        let _ = leave(py);
        return Err(err);
    }
    let sent: Result<Option<PyObject>, PyObject> = match how {
        Step::Send => {
            let mut out: *mut ffi::PyObject = std::ptr::null_mut();
            // SAFETY: coro is a live object; PyIter_Send gives us a new
            // reference in `out` for both the yield and the return cases.
            let r = unsafe { ffi::PyIter_Send(coro.as_ptr(), ffi::Py_None(), &mut out) };
            match r {
                ffi::PySendResult::PYGEN_NEXT => {
                    Ok(Some(unsafe { PyObject::from_owned_ptr(py, out) }))
                }
                ffi::PySendResult::PYGEN_RETURN => {
                    let value = unsafe { PyObject::from_owned_ptr(py, out) };
                    Err(PyStopIteration::new_err((value,)).into_value(py).into_any())
                }
                _ => Err(PyErr::fetch(py).into_value(py).into_any()),
            }
        }
        Step::Throw(exc) => match coro.call_method1(py, intern!(py, "throw"), (exc,)) {
            Ok(y) => Ok(Some(y)),
            Err(e) => Err(e.into_value(py).into_any()),
        },
    };
    // SAFETY: paired with the Enter above.
    unsafe { ffi::PyContext_Exit(context.as_ptr()) };
    leave(py)?;
    match sent {
        Ok(Some(yielded)) => on_yield(slf, yielded),
        Ok(None) => Ok(()),
        Err(exc) => on_end(slf, exc.into_bound(py)),
    }
}

/// The coroutine yielded: wait on the future it gave, or step again soon.
fn on_yield(slf: &Bound<'_, HandlerTask>, yielded: PyObject) -> PyResult<()> {
    let py = slf.py();
    let y = yielded.bind(py);
    let loop_ = slf.borrow().loop_.clone_ref(py);
    if y.is_none() {
        // A bare `yield` (asyncio.sleep(0)): give the loop a turn, then go on.
        loop_.call_method1(py, intern!(py, "call_soon"), (slf.getattr("_resume")?,))?;
        return Ok(());
    }
    let blocking = y.getattr_opt(intern!(py, "_asyncio_future_blocking"))?;
    let bad = match blocking {
        Some(b) if b.is_truthy()? => {
            if y.is(slf) {
                Some(format!("Task cannot await on itself: {}", y.repr()?))
            } else {
                y.setattr(intern!(py, "_asyncio_future_blocking"), false)?;
                y.call_method1(intern!(py, "add_done_callback"), (slf.getattr("_wakeup")?,))?;
                let mut t = slf.borrow_mut();
                t.waiter = Some(yielded.clone_ref(py));
                if t.must_cancel {
                    let msg = t.cancel_msg.as_ref().map(|m| m.clone_ref(py));
                    drop(t);
                    let kwargs = [(intern!(py, "msg"), msg)].into_py_dict(py)?;
                    if y.call_method(intern!(py, "cancel"), (), Some(&kwargs))?
                        .is_truthy()?
                    {
                        slf.borrow_mut().must_cancel = false;
                    }
                }
                None
            }
        }
        Some(_) => Some(format!(
            "yield was used instead of yield from in task {} with {}",
            slf.repr()?,
            y.repr()?
        )),
        None => Some(format!("Task got bad yield: {}", y.repr()?)),
    };
    if let Some(message) = bad {
        let err = PyRuntimeError::new_err(message).into_value(py);
        loop_.call_method1(py, intern!(py, "call_soon"), (slf.getattr("_throw")?, err))?;
    }
    Ok(())
}

/// The coroutine ended: returned (StopIteration), was cancelled, or raised.
fn on_end(slf: &Bound<'_, HandlerTask>, exc: Bound<'_, PyAny>) -> PyResult<()> {
    let py = slf.py();
    let aio = asyncio(py)?;
    let (state, value, fatal) = if exc.is_instance_of::<PyStopIteration>() {
        let t = slf.borrow();
        if t.must_cancel {
            let msg = t.cancel_msg.as_ref().map(|m| m.clone_ref(py));
            drop(t);
            (
                State::Cancelled,
                HandlerTask::cancelled_error(py, msg.as_ref())?,
                false,
            )
        } else {
            (
                State::Finished,
                exc.getattr(intern!(py, "value"))?.unbind(),
                false,
            )
        }
    } else if exc.is_instance(aio.cancelled_error.bind(py))? {
        (State::Cancelled, exc.clone().unbind(), false)
    } else {
        let fatal = exc.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>()
            || exc.is_instance_of::<pyo3::exceptions::PySystemExit>();
        (State::Failed, exc.clone().unbind(), fatal)
    };
    let (on_done, args, callbacks, loop_) = {
        let mut t = slf.borrow_mut();
        t.state = state;
        t.must_cancel = false;
        t.coro = None;
        t.outcome = Some(value.clone_ref(py));
        (
            t.on_done.take(),
            t.done_args.take(),
            std::mem::take(&mut t.callbacks),
            t.loop_.clone_ref(py),
        )
    };
    for cb in callbacks {
        loop_.call_method1(py, intern!(py, "call_soon"), (cb, slf.clone()))?;
    }
    if let Some(on_done) = on_done {
        let mut call: Vec<PyObject> = match &args {
            Some(a) => a.bind(py).iter().map(Bound::unbind).collect(),
            None => Vec::new(),
        };
        call.push(
            pyo3::types::PyBool::new(py, state == State::Finished)
                .to_owned()
                .into_any()
                .unbind(),
        );
        call.push(value.clone_ref(py));
        on_done.call1(py, PyTuple::new(py, call)?)?;
    }
    if fatal {
        return Err(PyErr::from_value(value.into_bound(py)));
    }
    Ok(())
}

use pyo3::types::IntoPyDict;

#[pymethods]
impl HandlerTask {
    #[new]
    #[pyo3(signature = (coro, event_loop, on_done, done_args, name=None))]
    fn new(
        py: Python<'_>,
        coro: PyObject,
        event_loop: PyObject,
        on_done: PyObject,
        done_args: Py<PyTuple>,
        name: Option<PyObject>,
    ) -> PyResult<Self> {
        // SAFETY: returns a new reference (or NULL with an exception set).
        let context = unsafe { PyObject::from_owned_ptr_or_err(py, ffi::PyContext_CopyCurrent())? };
        Ok(Self {
            coro: Some(coro),
            loop_: event_loop,
            context,
            on_done: Some(on_done),
            done_args: Some(done_args),
            name: name.unwrap_or_else(|| intern!(py, "surge-handler").clone().into_any().unbind()),
            waiter: None,
            must_cancel: false,
            cancel_msg: None,
            cancel_requests: 0,
            state: State::Pending,
            outcome: None,
            callbacks: Vec::new(),
            started: false,
        })
    }

    /// Runs the first step now (once).
    fn start(slf: &Bound<'_, Self>) -> PyResult<()> {
        {
            let mut t = slf.borrow_mut();
            if t.started {
                return Err(PyRuntimeError::new_err("task already started"));
            }
            t.started = true;
        }
        step(slf, Step::Send)
    }

    fn _resume(slf: &Bound<'_, Self>) -> PyResult<()> {
        step(slf, Step::Send)
    }

    fn _throw(slf: &Bound<'_, Self>, exc: PyObject) -> PyResult<()> {
        step(slf, Step::Throw(exc))
    }

    fn _wakeup(slf: &Bound<'_, Self>, future: &Bound<'_, PyAny>) -> PyResult<()> {
        match future.call_method0(intern!(slf.py(), "result")) {
            Ok(_) => step(slf, Step::Send),
            Err(e) => step(slf, Step::Throw(e.into_value(slf.py()).into_any())),
        }
    }

    /// As `asyncio.Task.cancel`: False once done.
    #[pyo3(signature = (msg=None))]
    fn cancel(slf: &Bound<'_, Self>, msg: Option<PyObject>) -> PyResult<bool> {
        let py = slf.py();
        let waiter = {
            let mut t = slf.borrow_mut();
            if t.state != State::Pending {
                return Ok(false);
            }
            t.cancel_requests += 1;
            t.waiter.as_ref().map(|w| w.clone_ref(py))
        };
        if let Some(w) = waiter {
            let kwargs =
                [(intern!(py, "msg"), msg.as_ref().map(|m| m.clone_ref(py)))].into_py_dict(py)?;
            if w.bind(py)
                .call_method(intern!(py, "cancel"), (), Some(&kwargs))?
                .is_truthy()?
            {
                return Ok(true);
            }
        }
        let mut t = slf.borrow_mut();
        t.must_cancel = true;
        t.cancel_msg = msg;
        let unstarted = !t.started;
        drop(t);
        if unstarted {
            // Nothing will step it: end it now, as a task cancelled before its
            // first step does.
            slf.borrow_mut().started = true;
            step(slf, Step::Send)?;
        }
        Ok(true)
    }

    fn cancelling(&self) -> u32 {
        self.cancel_requests
    }

    fn uncancel(&mut self) -> u32 {
        if self.cancel_requests > 0 {
            self.cancel_requests -= 1;
        }
        self.cancel_requests
    }

    fn done(&self) -> bool {
        self.state != State::Pending
    }

    fn cancelled(&self) -> bool {
        self.state == State::Cancelled
    }

    fn result(&self, py: Python<'_>) -> PyResult<PyObject> {
        match (self.state, &self.outcome) {
            (State::Finished, Some(v)) => Ok(v.clone_ref(py)),
            (State::Pending, _) => Err(PyErr::from_type(
                asyncio(py)?.invalid_state_error.bind(py).clone(),
                "Result is not ready.",
            )),
            (_, Some(e)) => Err(PyErr::from_value(e.bind(py).clone())),
            _ => Err(PyRuntimeError::new_err("task has no outcome")),
        }
    }

    fn exception(&self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        match (self.state, &self.outcome) {
            (State::Failed, Some(e)) => Ok(Some(e.clone_ref(py))),
            (State::Finished, _) => Ok(None),
            (State::Cancelled, Some(e)) => Err(PyErr::from_value(e.bind(py).clone())),
            _ => Err(PyErr::from_type(
                asyncio(py)?.invalid_state_error.bind(py).clone(),
                "Exception is not set.",
            )),
        }
    }

    #[pyo3(signature = (callback, *, context=None))]
    fn add_done_callback(
        slf: &Bound<'_, Self>,
        callback: PyObject,
        context: Option<PyObject>,
    ) -> PyResult<()> {
        let py = slf.py();
        let _ = context; // callbacks run in the loop's current context
        let mut t = slf.borrow_mut();
        if t.state == State::Pending {
            t.callbacks.push(callback);
            return Ok(());
        }
        let loop_ = t.loop_.clone_ref(py);
        drop(t);
        loop_.call_method1(py, intern!(py, "call_soon"), (callback, slf.clone()))?;
        Ok(())
    }

    fn remove_done_callback(&mut self, py: Python<'_>, callback: PyObject) -> PyResult<usize> {
        let before = self.callbacks.len();
        let mut kept = Vec::with_capacity(before);
        for cb in self.callbacks.drain(..) {
            if !cb.bind(py).eq(callback.bind(py))? {
                kept.push(cb);
            }
        }
        self.callbacks = kept;
        Ok(before - self.callbacks.len())
    }

    fn get_name(&self, py: Python<'_>) -> PyObject {
        self.name.clone_ref(py)
    }

    fn set_name(&mut self, py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.name = value.str()?.into_any().unbind();
        let _ = py;
        Ok(())
    }

    fn get_coro(&self, py: Python<'_>) -> Option<PyObject> {
        self.coro.as_ref().map(|c| c.clone_ref(py))
    }

    fn get_loop(&self, py: Python<'_>) -> PyObject {
        self.loop_.clone_ref(py)
    }

    fn get_context(&self, py: Python<'_>) -> PyObject {
        self.context.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let state = match self.state {
            State::Pending => "pending",
            State::Finished => "finished",
            State::Cancelled => "cancelled",
            State::Failed => "failed",
        };
        Ok(format!(
            "<HandlerTask {} name={}>",
            state,
            self.name.bind(py).repr()?
        ))
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for o in [
            &self.coro,
            &self.on_done,
            &self.waiter,
            &self.cancel_msg,
            &self.outcome,
        ]
        .into_iter()
        .flatten()
        {
            visit.call(o)?;
        }
        if let Some(a) = &self.done_args {
            visit.call(a)?;
        }
        visit.call(&self.loop_)?;
        visit.call(&self.context)?;
        visit.call(&self.name)?;
        for cb in &self.callbacks {
            visit.call(cb)?;
        }
        Ok(())
    }

    fn __clear__(&mut self) {
        self.coro = None;
        self.on_done = None;
        self.done_args = None;
        self.waiter = None;
        self.cancel_msg = None;
        self.outcome = None;
        self.callbacks.clear();
    }
}

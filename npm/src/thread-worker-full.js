// One CPU thread of `rlx/full`'s threaded module (threads.js starts it).
import * as glue from "../dist/full/mt/rlx_web.js";
import { serveThread } from "./thread-serve.js";

serveThread(glue);
